"""Small helpers over IR expressions that every evaluator shares.

Contract: `env_key(e)` is the environment key every evaluator (egglog terms, Python values,
symbolic) binds a `Ref`, `shape(?x)` or `shape(term)` to; `const_int(e)` reads an integer
constant (a literal or its negation) or gives None.
"""
from __future__ import annotations

from eqdsl import ir


def shape_key(var: str) -> str:
    return f"shape(?{var})"


def term_shape_key(e: ir.ShapeOfTerm) -> str:
    return f"shape({e.pattern!r})"


def env_key(e: ir.Ref | ir.ShapeOf | ir.ShapeOfTerm) -> str:
    """The environment key every evaluator (egglog terms, Python values, symbolic) binds `e` to."""
    match e:
        case ir.Ref(name=n):
            return n
        case ir.ShapeOf(var=v):
            return shape_key(v)
        case ir.ShapeOfTerm():
            return term_shape_key(e)


def const_int(e: ir.Expr) -> int | None:
    match e:
        case ir.Const(value=int() as v) if not isinstance(v, bool):
            return v
        case ir.UnOp(op="neg", arg=ir.Const(value=int() as v)):
            return -v
        case _:
            return None
