"""Evaluate typed IR expressions in Python, with egglog's integer semantics.

Contract: `evaluate(e, env)` returns an int, str, bool or tuple of ints; `env` maps `Ref` names
(and `shape(?x)` keys) to values. Division truncates toward zero like egglog's i64 `/`; an
index out of range or a division by zero raises `EvalError`.
"""
from __future__ import annotations

from typing import Any, Callable, assert_never

from eqdsl import ir
from eqdsl.ir.builtins import BUILTINS, EvalError
from eqdsl.ir.exprs import const_int, env_key
from eqdsl.ir.nodes import Value


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


BINARY_OPS: dict[str, Callable[[Any, Any], Value]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": _div, "mod": _mod, "cat": lambda a, b: tuple(a) + tuple(b),
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}
def _at(seq: tuple[int, ...], i: int) -> int:
    if not -len(seq) <= i < len(seq):
        raise EvalError(f"index {i} out of range for a shape of rank {len(seq)}")
    return seq[i]


def evaluate(e: ir.Expr, env: dict[str, Value]) -> Value:
    match e:
        case ir.Const(value=v):
            return v
        case ir.Ref() | ir.ShapeOf() | ir.ShapeOfTerm() | ir.AnalysisOf():
            return env[env_key(e)]
        case ir.Builtin(fn=fn, args=args):
            return _EVALUATORS[fn](*(evaluate(a, env) for a in args))
        case ir.BinOp(op="and", left=l, right=r):
            return bool(evaluate(l, env)) and bool(evaluate(r, env))
        case ir.BinOp(op="or", left=l, right=r):
            return bool(evaluate(l, env)) or bool(evaluate(r, env))
        case ir.BinOp(op=op, left=l, right=r):
            return BINARY_OPS[op](evaluate(l, env), evaluate(r, env))
        case ir.UnOp(op="neg", arg=a):
            return -_int(a, env)
        case ir.UnOp(arg=a):
            return not evaluate(a, env)
        case ir.ListOf(items=items):
            return tuple(_int(i, env) for i in items)
        case ir.IndexOf(base=b, index=i):
            return _at(_ints(b, env), _int(i, env))
        case ir.SliceOf(base=b, lo=lo, hi=hi):
            return _ints(b, env)[lo:hi]
        case ir.FieldOf(base=b, index=k):
            return tuple(field_of(_ints(b, env), k))
        case ir.Replace(base=b, index=i, value=v):
            seq = list(_ints(b, env))
            k = _int(i, env)
            _at(tuple(seq), k)
            seq[k] = _int(v, env)
            return tuple(seq)
        case _:
            assert_never(e)


# the evaluator of every builtin that is not sugar (the checker rewrites those away)
_EVALUATORS: dict[str, Callable[..., Value]] = {n: b.evaluate for n, b in BUILTINS.items() if b.evaluate}


def _int(e: ir.Expr, env: dict[str, Value]) -> int:
    """`e`'s value where the checker typed it Int."""
    value = evaluate(e, env)
    if not isinstance(value, int):
        raise EvalError(f"expected an Int, found {value!r}")
    return value


def _ints(e: ir.Expr, env: dict[str, Value]) -> tuple[int, ...]:
    """`e`'s value where the checker typed it [Int] (a list from a caller's env is taken too)."""
    value: object = evaluate(e, env)
    if isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple):
        raise EvalError(f"expected a list of Ints, found {value!r}")
    return value


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


def application_shape(lang: ir.Language, op: str, args: list[Any]) -> Value | None:
    """The shape `op`'s shape rule gives these arguments (an operand given as its shape), None
    where `op` has none; `ShapeViolation` where a requirement fails or the rule cannot be computed
    for them (a drawn or enumerated application that is not a term of the language)."""
    rule = lang.shapes.get(op)
    if rule is None:
        return None
    try:
        return applied_shape(rule, dict(zip(rule.params, args)))
    except (EvalError, TypeError, IndexError) as err:
        raise ShapeViolation() from err
