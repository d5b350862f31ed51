"""Typed IR expressions → egglog expressions and query facts.

Contract: `term(e, env)` gives an egglog expression string; `facts(cond, env)` gives query facts
that hold exactly when the Bool expression `cond` is true. `env` maps `Ref` names and
`shape(?x)` keys to egglog expressions. An expression egglog cannot compute (`sum`) raises
`Unlowerable`; out-of-range indices and division by zero make the query fail, never panic.
egglog has no loops over a vec, so `prod`, `broadcasts`, `permute` and `is_perm` unroll to
MAX_RANK positions; a shape of higher rank makes the query fail (an index out of range), so a
rule can never fire on a result it did not check.
"""
from __future__ import annotations

from typing import assert_never

from eqdsl import ir
from eqdsl.ir.exprs import const_int, env_key

MAX_RANK = ir.MAX_RANK
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%"}
_CMP_FACT = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_CMP_BOOL = {"eq": "bool-=", "lt": "bool-<", "le": "bool-<=", "gt": "bool->", "ge": "bool->="}


class Unlowerable(Exception):
    """An expression with no egglog counterpart; the message says which part."""








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


def _rank_guard(base: str) -> str:
    """1 when len(base) <= MAX_RANK; otherwise an out-of-range vec-get fails the query."""
    return f"(vec-get (vec-of 1) (max 0 (- (vec-length {base}) {MAX_RANK})))"


def _from_end(base: str, k: int) -> str:
    """base[-k] after left-padding base with MAX_RANK ones (so it is 1 beyond base's rank)."""
    padded = f"(vec-append (vec-of {' '.join(['1'] * MAX_RANK)}) {base})"
    return f"(vec-get {padded} (- (vec-length {padded}) {k}))"


def _prod(base: str) -> str:
    factors = [_rank_guard(base)] + [_from_end(base, k) for k in range(1, MAX_RANK + 1)]
    return "(* " * (len(factors) - 1) + factors[0] + "".join(f" {f})" for f in factors[1:])


def _all(conds: list[str]) -> str:
    return "(and " * (len(conds) - 1) + conds[0] + "".join(f" {c})" for c in conds[1:])


def _broadcasts(b: str, a: str) -> str:
    return _all(_broadcasts_conds(b, a))


def _broadcasts_conds(b: str, a: str) -> list[str]:
    """b[-k] is 1 or a[-k] for k = 1..len(b); past len(b) the last pair is checked again."""
    nb, na = f"(vec-length {b})", f"(vec-length {a})"
    conds = [f"(bool-<= {nb} {na})", f"(bool-= {_rank_guard(b)} 1)"]
    for k in range(1, MAX_RANK + 1):
        at_b = f"(max 0 (- {nb} {k}))"
        bk, ak = f"(vec-get {b} {at_b})", f"(vec-get {a} (+ (- {na} {nb}) {at_b}))"
        conds.append(f"(or (bool-= {bk} 1) (bool-= {bk} {ak}))")
    return conds


def _clamped(i: int, base: str) -> str:
    """min(i, len(base) - 1): positions past the end repeat the last one (idempotent sets)."""
    return f"(min {i} (- (vec-length {base}) 1))"


def _permute(x: str, p: str) -> str:
    result = x
    for i in range(MAX_RANK):
        at = _clamped(i, x) if i else f"(+ (- {_rank_guard(x)} 1) {_clamped(0, x)})"
        result = f"(vec-set {result} {at} (vec-get {x} (vec-get {p} {at})))"
    return result


def _positive(x: str) -> str:
    conds = [f"(bool-= {_rank_guard(x)} 1)", f"(bool->= (vec-length {x}) 1)"]
    conds += [f"(bool->= (vec-get {x} {_clamped(i, x)}) 1)" for i in range(MAX_RANK)]
    return _all(conds)


def _is_perm(p: str) -> str:
    """Every entry in [0, n) and the entries' bits cover all n: a permutation (n <= MAX_RANK)."""
    n = f"(vec-length {p})"
    entries = [f"(vec-get {p} {_clamped(i, p)})" for i in range(MAX_RANK)]
    mask = "(| " * (MAX_RANK - 1) + f"(<< 1 {entries[0]})" + "".join(f" (<< 1 {e}))" for e in entries[1:])
    conds = [f"(bool-= {_rank_guard(p)} 1)", f"(bool->= {n} 1)",
             f"(bool-= {mask} (- (<< 1 {n}) 1))"]
    conds += [f"(bool-<= 0 {e})" for e in entries] + [f"(bool-< {e} {n})" for e in entries]
    return _all(conds)


def term(e: ir.Expr, env: dict[str, str]) -> str:
    match e:
        case ir.Const(value=v):
            return literal(v)
        case ir.Ref() | ir.ShapeOf() | ir.ShapeOfTerm():
            return env[env_key(e)]
        case ir.Builtin(fn="len", args=(a,)):
            return f"(vec-length {term(a, env)})"
        case ir.Builtin(fn="min" | "max" as fn, args=(a, b)):
            return f"({fn} {term(a, env)} {term(b, env)})"
        case ir.Builtin(fn="prod", args=(a,)):
            return _prod(term(a, env))
        case ir.Builtin(fn="broadcasts", args=(b, a)):
            return _broadcasts(term(b, env), term(a, env))
        case ir.Builtin(fn="permute", args=(x, p)):
            return _permute(term(x, env), term(p, env))
        case ir.Builtin(fn="is_perm", args=(p,)):
            return _is_perm(term(p, env))
        case ir.Builtin(fn="positive", args=(x,)):
            return _positive(term(x, env))
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
        case ir.Builtin(fn="broadcasts", args=(b, a)):
            return [f"(= true {c})" for c in _broadcasts_conds(term(b, env), term(a, env))]
        case _:
            return [f"(= true {term(cond, env)})"]
