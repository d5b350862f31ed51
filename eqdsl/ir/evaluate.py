"""Evaluate typed IR expressions in Python, with egglog's integer semantics.

Contract: `evaluate(e, env)` returns an int, str, bool or tuple of ints; `env` maps `Ref` names
(and `shape(?x)` keys) to values. Division truncates toward zero like egglog's i64 `/`; an
index out of range or a division by zero raises `EvalError`.
"""
from __future__ import annotations

import math
from typing import assert_never

from eqdsl import ir
from eqdsl.ir.exprs import const_int, env_key

Value = int | str | bool | tuple[int, ...]


class EvalError(Exception):
    pass


def _div(a: int, b: int) -> int:
    if b == 0:
        raise EvalError("division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _mod(a: int, b: int) -> int:
    if b == 0:
        raise EvalError("modulo by zero")
    return a - b * _div(a, b)


def field_of(value: tuple[int, ...] | list, index: int) -> tuple | list:
    """Field `index` of a two-field value `[n] ++ first ++ second` (see `ir.FieldOf`)."""
    if not value or not isinstance(value[0], int) or not 0 <= value[0] <= len(value) - 1:
        raise EvalError(f"{list(value)} is not a two-field value [n] ++ first (n items) ++ second")
    return value[1:1 + value[0]] if index == 0 else value[1 + value[0]:]


BINARY_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": _div, "mod": _mod, "cat": lambda a, b: tuple(a) + tuple(b),
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}
def _ranked(shape: tuple[int, ...]) -> tuple[int, ...]:
    if len(shape) > ir.MAX_RANK:
        raise EvalError(f"a shape of rank {len(shape)}: shape builtins support ranks up to {ir.MAX_RANK}")
    return shape


def broadcasts(b: tuple[int, ...], a: tuple[int, ...]) -> bool:
    """True when b broadcasts to a's shape (numpy: right-aligned, each dim 1 or equal); b has
    rank >= 1 (egglog's lowering re-checks b's first axis past its rank)."""
    _ranked(b)
    return 1 <= len(b) <= len(a) and all(d in (1, a[len(a) - len(b) + i]) for i, d in enumerate(b))


def is_perm(p: tuple[int, ...]) -> bool:
    return sorted(_ranked(p)) == list(range(len(p)))


def permute(x: tuple[int, ...], p: tuple[int, ...]) -> tuple[int, ...]:
    if len(p) != len(x) or not is_perm(p):
        raise EvalError(f"{list(p)} is not a permutation of the axes of a rank-{len(x)} shape")
    return tuple(x[i] for i in p)


def prod(x: tuple[int, ...]) -> int:
    return math.prod(_ranked(x))


def positive(x: tuple[int, ...]) -> bool:
    return len(_ranked(x)) >= 1 and all(d >= 1 for d in x)


def remove(x: tuple[int, ...], i: int) -> tuple[int, ...]:
    if not 0 <= i < len(x):
        raise EvalError(f"remove({list(x)}, {i}): index out of range")
    return tuple(x[:i]) + tuple(x[i + 1:])


_BUILTIN = {"len": len, "prod": prod, "positive": positive, "sum": sum, "min": min, "max": max,
            "broadcasts": broadcasts, "permute": permute, "is_perm": is_perm, "remove": remove}


def _at(seq: tuple[int, ...], i: int) -> int:
    if not -len(seq) <= i < len(seq):
        raise EvalError(f"index {i} out of range for a shape of rank {len(seq)}")
    return seq[i]


def evaluate(e: ir.Expr, env: dict[str, Value]) -> Value:
    match e:
        case ir.Const(value=v):
            return v
        case ir.Ref() | ir.ShapeOf() | ir.ShapeOfTerm():
            return env[env_key(e)]
        case ir.Builtin(fn=fn, args=args):
            return _BUILTIN[fn](*(evaluate(a, env) for a in args))
        case ir.BinOp(op="and", left=l, right=r):
            return bool(evaluate(l, env)) and bool(evaluate(r, env))
        case ir.BinOp(op="or", left=l, right=r):
            return bool(evaluate(l, env)) or bool(evaluate(r, env))
        case ir.BinOp(op=op, left=l, right=r):
            return BINARY_OPS[op](evaluate(l, env), evaluate(r, env))
        case ir.UnOp(op="neg", arg=a):
            return -evaluate(a, env)
        case ir.UnOp(arg=a):
            return not evaluate(a, env)
        case ir.ListOf(items=items):
            return tuple(evaluate(i, env) for i in items)
        case ir.IndexOf(base=b, index=i):
            return _at(evaluate(b, env), evaluate(i, env))
        case ir.SliceOf(base=b, lo=lo, hi=hi):
            return tuple(evaluate(b, env))[lo:hi]
        case ir.FieldOf(base=b, index=k):
            return tuple(field_of(tuple(evaluate(b, env)), k))
        case ir.Replace(base=b, index=i, value=v):
            seq = list(evaluate(b, env))
            k = evaluate(i, env)
            _at(tuple(seq), k)
            seq[k] = evaluate(v, env)
            return tuple(seq)
        case _:
            assert_never(e)


__all__ = ["evaluate", "EvalError", "Value", "const_int"]


class ShapeViolation(Exception):
    """A shape rule's `require` is false for these arguments."""


def applied_shape(rule: ir.ShapeRule, env: dict[str, Value]) -> Value:
    """The shape `rule` gives an application whose parameters have the values in `env`; raises
    `ShapeViolation` when a requirement fails and `EvalError` when the rule cannot be computed."""
    for req in rule.requires:
        if not evaluate(req, env):
            raise ShapeViolation()
    return evaluate(rule.body, env)
