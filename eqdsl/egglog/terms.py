"""Typed IR expressions → egglog expressions and query facts.

Contract: `term(e, env)` gives an egglog expression (an `Sexp` tree); `facts(cond, env)` gives
query facts that hold exactly when the Bool expression `cond` is true. `env` maps `Ref` names and
`shape(?x)` keys (`eqdsl.ir.exprs.env_key`) to egglog expressions. An expression egglog cannot compute (`sum`) raises
`Unlowerable`; out-of-range indices and division by zero make the query fail, never panic.
egglog has no loops over a vec, so `prod`, `broadcasts`, `permute` and `is_perm` unroll to
MAX_RANK positions; a shape of higher rank makes the query fail (an index out of range), so a
rule can never fire on a result it did not check.
"""
from __future__ import annotations

from typing import Callable, assert_never

from eqdsl import ir
from eqdsl.egglog.sexp import Atom, Call, Sexp, Var, call, chain
from eqdsl.ir.exprs import const_int, env_key, subexprs

MAX_RANK = ir.MAX_RANK
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%"}
_CMP_FACT = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_CMP_BOOL = {"eq": "bool-=", "lt": "bool-<", "le": "bool-<=", "gt": "bool->", "ge": "bool->="}


class Unlowerable(Exception):
    """An expression with no egglog counterpart; the message says which part."""


def num(n: int) -> Atom:
    return Atom(str(n))


def vec_of(items: list[Sexp]) -> Call:
    """An IVec; the empty one typed by construction, since egglog cannot always infer `(vec-empty)`'s."""
    return Call("vec-of", tuple(items)) if items else call("vec-pop", Call("vec-of", (num(0),)))


def literal(value: int | str | bool | tuple[int, ...]) -> Sexp:
    match value:
        case tuple():
            return vec_of([num(v) for v in value])
        case bool():
            return Atom("true" if value else "false")
        case int():
            return num(value)
        case str():
            return Atom('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"')
        case _:
            assert_never(value)


def _length(base: Sexp) -> Call:
    return call("vec-length", base)


def _at(base: Sexp, index: int) -> Call:
    """Index a vec with a constant index; negative counts from the end."""
    if index >= 0:
        return call("vec-get", base, num(index))
    return call("vec-get", base, call("-", _length(base), num(-index)))


def _slice(base: Sexp, lo: int | None, hi: int | None) -> Sexp:
    lo = lo or 0
    if hi is not None and hi >= 0 and lo >= 0:
        return vec_of([_at(base, i) for i in range(lo, hi)])
    if lo < 0 and hi is None:
        return vec_of([_at(base, i) for i in range(lo, 0)])
    if lo < 0:
        raise Unlowerable("slices with a negative start need no end, e.g. a[-2:]")
    result = base
    for _ in range(-hi if hi is not None else 0):
        result = call("vec-pop", result)
    for _ in range(lo):
        result = call("vec-remove", result, num(0))
    return result


def _one_unless(negative: Sexp) -> Call:
    """1 when `negative` <= 0; otherwise an out-of-range vec-get fails the query."""
    return call("vec-get", vec_of([num(1)]), call("max", num(0), negative))


def _dynamic_slice(base: Sexp, lo: Sexp, hi: Sexp, bind: Callable[[Sexp], Sexp]) -> Sexp:
    """base[lo:hi] with bounds computed in the query: MAX_RANK one-item-or-empty pieces, each
    picked from a vec of two vecs by whether its position is inside (egglog has no loops); a
    slice longer than MAX_RANK or with hi < lo fails the query. `bind` may name a repeated
    subterm (a query variable) so the text stays small."""
    count = bind(call("-", hi, lo))
    guard = call("*", _one_unless(call("-", count, num(MAX_RANK))), _one_unless(call("-", num(0), count)))
    padded = bind(call("vec-append", base, vec_of([num(0)] * MAX_RANK)))
    start = bind(call("+", lo, call("-", guard, num(1))))  # lo, once the guard holds
    pieces = []
    for i in range(MAX_RANK):
        inside = call("min", num(1), call("max", num(0), call("-", count, num(i))))
        item = vec_of([call("vec-get", padded, call("+", start, num(i)))])
        pieces.append(call("vec-get", Call("vec-of", (Call("vec-empty"), item)), inside))
    return chain("vec-append", pieces)


def _field(base: Sexp, index: int, bind: Callable[[Sexp], Sexp] = lambda s: s) -> Sexp:
    """Field `index` of a two-field value `[n] ++ first ++ second` (see ir.FieldOf)."""
    split = bind(call("+", num(1), call("vec-get", base, num(0))))
    if index == 0:
        return _dynamic_slice(base, num(1), split, bind)
    return _dynamic_slice(base, split, _length(base), bind)


def field_key(e: ir.FieldOf) -> str:
    """The env key under which a caller may have bound `e`'s value (see `bind_fields`)."""
    return f"field:{e!r}"


def bind_fields(exprs: list[ir.Expr], env: dict[str, Sexp], fresh: Callable[[], str]) -> list[Sexp]:
    """Query facts `(= _fN <field>)` for every field read in `exprs`, innermost first, each bound
    once in `env`: a field is a large unrolled term, and `prod` alone reads its argument 8 times."""
    out: list[Sexp] = []

    def bind(value: Sexp) -> Var:
        name = fresh()
        out.append(call("=", Var(name), value))
        return Var(name)

    for e in exprs:
        for node in _field_reads(e):
            key = field_key(node)
            if key not in env:
                env[key] = bind(_field(term(node.base, env), node.index, bind))
    return out


def _field_reads(e: ir.Expr) -> list[ir.FieldOf]:
    """The field reads inside `e`, innermost first."""
    inner = [n for sub in subexprs(e) for n in _field_reads(sub)]
    return inner + [e] if isinstance(e, ir.FieldOf) else inner


def _rank_guard(base: Sexp) -> Call:
    """1 when len(base) <= MAX_RANK; otherwise an out-of-range vec-get fails the query."""
    return call("vec-get", vec_of([num(1)]), call("max", num(0), call("-", _length(base), num(MAX_RANK))))


def _from_end(base: Sexp, k: int) -> Call:
    """base[-k] after left-padding base with MAX_RANK ones (so it is 1 beyond base's rank)."""
    padded = call("vec-append", vec_of([num(1)] * MAX_RANK), base)
    return call("vec-get", padded, call("-", _length(padded), num(k)))


def _prod(base: Sexp) -> Sexp:
    return chain("*", [_rank_guard(base)] + [_from_end(base, k) for k in range(1, MAX_RANK + 1)])


def _broadcasts_conds(b: Sexp, a: Sexp) -> list[Sexp]:
    """b[-k] is 1 or a[-k] for k = 1..MAX_RANK, both padded in front with ones (a rank-0 b, a
    scalar, broadcasts to anything)."""
    conds: list[Sexp] = [call("bool-<=", _length(b), _length(a)), call("bool-=", _rank_guard(b), num(1))]
    for k in range(1, MAX_RANK + 1):
        bk, ak = _from_end(b, k), _from_end(a, k)
        conds.append(call("or", call("bool-=", bk, num(1)), call("bool-=", bk, ak)))
    return conds


def _clamped(i: int, base: Sexp) -> Call:
    """min(i, len(base) - 1): positions past the end repeat the last one (idempotent sets)."""
    return call("min", num(i), call("-", _length(base), num(1)))


def _permute(x: Sexp, p: Sexp) -> Sexp:
    result = x
    for i in range(MAX_RANK):
        at = _clamped(i, x) if i else call("+", call("-", _rank_guard(x), num(1)), _clamped(0, x))
        result = call("vec-set", result, at, call("vec-get", x, call("vec-get", p, at)))
    return result


def _positive(x: Sexp) -> Sexp:
    conds: list[Sexp] = [call("bool-=", _rank_guard(x), num(1)), call("bool->=", _length(x), num(1))]
    conds += [call("bool->=", call("vec-get", x, _clamped(i, x)), num(1)) for i in range(MAX_RANK)]
    return chain("and", conds)


def _is_perm(p: Sexp) -> Sexp:
    """Every entry in [0, n) and the entries' bits cover all n: a permutation (n <= MAX_RANK)."""
    n = _length(p)
    entries = [call("vec-get", p, _clamped(i, p)) for i in range(MAX_RANK)]
    mask = chain("|", [call("<<", num(1), e) for e in entries])
    conds: list[Sexp] = [call("bool-=", _rank_guard(p), num(1)), call("bool->=", n, num(1)),
                         call("bool-=", mask, call("-", call("<<", num(1), n), num(1)))]
    conds += [call("bool-<=", num(0), e) for e in entries] + [call("bool-<", e, n) for e in entries]
    return chain("and", conds)


def term(e: ir.Expr, env: dict[str, Sexp]) -> Sexp:
    match e:
        case ir.Const(value=v):
            return literal(v)
        case ir.Ref() | ir.ShapeOf() | ir.ShapeOfTerm() | ir.AnalysisOf():
            if env_key(e) not in env:  # a target param the rules read, with no target bound
                raise Unlowerable(f"'{env_key(e)}' has no value (a target param: give a target, "
                                  "e.g. `eqdsl compile FILE --target NAME`)")
            return env[env_key(e)]
        case ir.Builtin():
            return _builtin(e, env)
        case ir.BinOp(op=op, left=l, right=r):
            return _binop(op, term(l, env), term(r, env))
        case ir.UnOp(op="neg", arg=a):
            return call("-", num(0), term(a, env))
        case ir.UnOp(op="not", arg=a):
            return call("not", term(a, env))
        case ir.UnOp():
            raise AssertionError(e)
        case ir.ListOf(items=items):
            return vec_of([term(i, env) for i in items])
        case ir.IndexOf(base=b, index=i):
            return _index(term(b, env), i, env)
        case ir.SliceOf(base=b, lo=lo, hi=hi):
            return _slice(term(b, env), lo, hi)
        case ir.FieldOf(base=b, index=index):
            return env.get(field_key(e)) or _field(term(b, env), index)
        case ir.Replace(base=b, index=i, value=v):
            base = term(b, env)
            k = const_int(i)
            idx = term(i, env) if k is None or k >= 0 else call("-", _length(base), num(-k))
            return call("vec-set", base, idx, term(v, env))
        case _:
            assert_never(e)


# egglog's meaning of each builtin of `eqdsl.ir.builtins.BUILTINS` whose `in_egglog` is set
LOWERINGS: dict[str, Callable[..., Sexp]] = {
    "len": _length, "remove": lambda xs, i: call("vec-remove", xs, i),
    "min": lambda a, b: Call("min", (a, b)), "max": lambda a, b: Call("max", (a, b)),
    "prod": _prod, "permute": _permute, "is_perm": _is_perm, "positive": _positive,
    "broadcasts": lambda b, a: chain("and", _broadcasts_conds(b, a)),
}


def _builtin(e: ir.Builtin, env: dict[str, Sexp]) -> Sexp:
    if e.fn == "len" and isinstance(e.args[0], ir.FieldOf) and e.args[0].index == 0:
        return call("vec-get", term(e.args[0].base, env), num(0))  # stored as the value's first item
    lower = LOWERINGS.get(e.fn)
    if lower is None:
        raise Unlowerable(f"{e.fn}(...) is only available in cost rules")
    return lower(*(term(a, env) for a in e.args))


def _index(base: Sexp, index: ir.Expr, env: dict[str, Sexp]) -> Sexp:
    k = const_int(index)
    return _at(base, k) if k is not None else call("vec-get", base, term(index, env))


def _binop(op: str, left: Sexp, right: Sexp) -> Sexp:
    if op in _ARITH:
        return call(_ARITH[op], left, right)
    if op == "cat":
        return call("vec-append", left, right)
    if op in ("and", "or"):
        return call(op, left, right)
    if op == "ne":
        return call("not", call("bool-=", left, right))
    return call(_CMP_BOOL[op], left, right)


def facts(cond: ir.Expr, env: dict[str, Sexp]) -> list[Sexp]:
    """Query facts for a Bool expression: conjunctions split, comparisons become filters."""
    match cond:
        case ir.BinOp(op="and", left=l, right=r):
            return facts(l, env) + facts(r, env)
        case ir.BinOp(op=op, left=l, right=r) if op in _CMP_FACT and l.type != ir.Prim.BOOL:
            return [call(_CMP_FACT[op], term(l, env), term(r, env))]
        case ir.Const(value=True):
            return []
        case ir.Builtin(fn="broadcasts", args=(b, a)):
            return [call("=", Atom("true"), c) for c in _broadcasts_conds(term(b, env), term(a, env))]
        case _:
            return [call("=", Atom("true"), term(cond, env))]
