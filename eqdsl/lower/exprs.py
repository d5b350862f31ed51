"""Typed IR expressions → egglog expressions and query facts.

Contract: `term(e, env)` gives an egglog expression string; `facts(cond, env)` gives query facts
that hold exactly when the Bool expression `cond` is true. `env` maps `Ref` names and
`shape(?x)` keys to egglog expressions. An expression egglog cannot compute (`prod`, `sum`) raises
`Unlowerable`; out-of-range indices and division by zero make the query fail, never panic.
"""
from __future__ import annotations

from typing import assert_never

from eqdsl import ir

_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%"}
_CMP_FACT = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_CMP_BOOL = {"eq": "bool-=", "lt": "bool-<", "le": "bool-<=", "gt": "bool->", "ge": "bool->="}


class Unlowerable(Exception):
    """An expression with no egglog counterpart; the message says which part."""


def shape_key(var: str) -> str:
    return f"shape(?{var})"


def term_shape_key(e: ir.ShapeOfTerm) -> str:
    return f"shape({e.pattern!r})"


def literal(value: int | str | bool | tuple[int, ...]) -> str:
    match value:
        case tuple():
            return "(vec-of " + " ".join(str(v) for v in value) + ")" if value else "(vec-empty)"
        case bool():
            return "true" if value else "false"
        case int():
            return str(value)
        case str():
            return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        case _:
            assert_never(value)


def const_int(e: ir.Expr) -> int | None:
    match e:
        case ir.Const(value=int() as v) if not isinstance(v, bool):
            return v
        case ir.UnOp(op="neg", arg=ir.Const(value=int() as v)):
            return -v
        case _:
            return None


def _at(base: str, index: int) -> str:
    """Index a vec with a constant index; negative counts from the end."""
    if index >= 0:
        return f"(vec-get {base} {index})"
    return f"(vec-get {base} (- (vec-length {base}) {-index}))"


def _slice(base: str, lo: int | None, hi: int | None) -> str:
    lo = lo or 0
    if hi is not None and hi >= 0 and lo >= 0:
        return "(vec-of " + " ".join(_at(base, i) for i in range(lo, hi)) + ")" if hi > lo else "(vec-empty)"
    if lo < 0 and hi is None:
        return "(vec-of " + " ".join(_at(base, i) for i in range(lo, 0)) + ")"
    if lo < 0:
        raise Unlowerable("slices with a negative start need no end, e.g. a[-2:]")
    result = base
    for _ in range(-hi if hi is not None else 0):
        result = f"(vec-pop {result})"
    for _ in range(lo):
        result = f"(vec-remove {result} 0)"
    return result


def term(e: ir.Expr, env: dict[str, str]) -> str:
    match e:
        case ir.Const(value=v):
            return literal(v)
        case ir.Ref(name=n):
            return env[n]
        case ir.ShapeOf(var=v):
            return env[shape_key(v)]
        case ir.ShapeOfTerm():
            return env[term_shape_key(e)]
        case ir.Builtin(fn="len", args=(a,)):
            return f"(vec-length {term(a, env)})"
        case ir.Builtin(fn="min" | "max" as fn, args=(a, b)):
            return f"({fn} {term(a, env)} {term(b, env)})"
        case ir.Builtin(fn=fn):
            raise Unlowerable(f"{fn}(...) is only available in cost rules")
        case ir.BinOp(op=op, left=l, right=r):
            return _binop(op, term(l, env), term(r, env))
        case ir.UnOp(op="neg", arg=a):
            return f"(- 0 {term(a, env)})"
        case ir.UnOp(op="not", arg=a):
            return f"(not {term(a, env)})"
        case ir.UnOp():
            raise AssertionError(e)
        case ir.ListOf(items=items):
            return "(vec-of " + " ".join(term(i, env) for i in items) + ")" if items else "(vec-empty)"
        case ir.IndexOf(base=b, index=i):
            return _index(term(b, env), i, env)
        case ir.SliceOf(base=b, lo=lo, hi=hi):
            return _slice(term(b, env), lo, hi)
        case ir.Replace(base=b, index=i, value=v):
            base = term(b, env)
            k = const_int(i)
            idx = term(i, env) if k is None or k >= 0 else f"(- (vec-length {base}) {-k})"
            return f"(vec-set {base} {idx} {term(v, env)})"
        case _:
            assert_never(e)


def _index(base: str, index: ir.Expr, env: dict[str, str]) -> str:
    k = const_int(index)
    return _at(base, k) if k is not None else f"(vec-get {base} {term(index, env)})"


def _binop(op: str, left: str, right: str) -> str:
    if op in _ARITH:
        return f"({_ARITH[op]} {left} {right})"
    if op == "cat":
        return f"(vec-append {left} {right})"
    if op in ("and", "or"):
        return f"({op} {left} {right})"
    if op == "ne":
        return f"(not (bool-= {left} {right}))"
    return f"({_CMP_BOOL[op]} {left} {right})"


def facts(cond: ir.Expr, env: dict[str, str]) -> list[str]:
    """Query facts for a Bool expression: conjunctions split, comparisons become filters."""
    match cond:
        case ir.BinOp(op="and", left=l, right=r):
            return facts(l, env) + facts(r, env)
        case ir.BinOp(op=op, left=l, right=r) if op in _CMP_FACT and l.type != ir.Prim.BOOL:
            return [f"({_CMP_FACT[op]} {term(l, env)} {term(r, env)})"]
        case ir.Const(value=True):
            return []
        case _:
            return [f"(= true {term(cond, env)})"]
