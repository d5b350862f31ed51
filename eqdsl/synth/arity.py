"""Rules lifted to an operator's n-ary forms: a law found at a binary concat
(`concat(1, ewadd(?a, ?b), ewadd(?c, ?d)) => ewadd(concat(1, ?a, ?c), concat(1, ?b, ?d))`) holds at
a five-way one (`concat5(1, ewadd(?a1, ?b1), ..., ewadd(?a5, ?b5)) => ewadd(concat5(1, ?a1, ...,
?a5), concat5(1, ?b1, ..., ?b5))`): 11 operators over 10 variables, which no enumeration reaches,
and what a model's cell of five additions joined by one concat (NasNet-A's) needs.

Contract: `variadic_forms(lang, holds)` maps a binary operator `b` (Int parameters, then two
operands of one sort, that sort its result) to its n-ary forms: each operator `o` of the same Int
parameters and k > 2 operands of that sort for which `holds(rule)` says
`o(?p.., ?x1, ..., ?xk) => b(?p.., b(?p.., ?x1, ?x2), ..., ?xk)` holds (verified from the
semantics, not read off the names). `lifted(rule, b, o, k)` is `rule` at the form `o`: where one
side is `b(p.., L, R)` with R a renaming of L's term variables (L's Int parameters kept), that
side becomes `o(p.., L1, ..., Lk)`, each Li L renamed apart, and on the other side each
`b(p.., U, U')` (U' U renamed as L is to R) becomes `o(p.., U1, ..., Uk)`; a condition over one
copy's variables is asked of every copy, one over both of each copy and the next. None where the
rule has `where`s, no such side, or the other side uses the copies' variables otherwise. The
caller verifies what it keeps: nothing here says a lifted rule holds.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any, Callable

from eqdsl import ir
from eqdsl.diagnostics import NO_SPAN
from eqdsl.ir.exprs import pattern_vars
from eqdsl.synth.candidates import renamed, stable_name

Forms = dict[str, tuple[tuple[str, int], ...]]  # binary operator -> (its k-ary form, k), k ascending


def variadic_forms(lang: ir.Language, holds: Callable[[ir.Rule], bool]) -> Forms:
    """See the module docstring."""
    forms: Forms = {}
    for b in lang.ops.values():
        prefix, operand = _signature(b)
        if operand is None or b.arity - len(prefix) != 2:
            continue
        found = [(o.name, o.arity - len(prefix)) for o in lang.ops.values()
                 if _signature(o) == (prefix, operand) and o.arity - len(prefix) > 2]
        found = [(name, k) for name, k in found if holds(_fold_rule(b, lang.ops[name], len(prefix)))]
        if found:
            forms[b.name] = tuple(sorted(found, key=lambda f: f[1]))
    return forms


def _signature(op: ir.Operator) -> tuple[tuple[ir.ValueType, ...], ir.SortType | None]:
    """(its leading Int parameters' types, the sort of all its other operands where that is its
    result's, else None)."""
    prefix = tuple(p.type for p in op.params if p.type == ir.Prim.INT)
    rest = op.params[len(prefix):]
    sorts = {p.type for p in rest}
    if any(p.type == ir.Prim.INT for p in rest) or sorts != {ir.SortType(op.result)}:
        return prefix, None
    return prefix, ir.SortType(op.result)


def _fold_rule(b: ir.Operator, o: ir.Operator, n_prefix: int) -> ir.Rule:
    """`o(?i0.., ?x1, ..., ?xk) => b(?i0.., b(?i0.., ?x1, ?x2), ..., ?xk)`."""
    params = tuple(ir.PVar(f"i{j}", ir.Prim.INT) for j in range(n_prefix))
    operands = [ir.PVar(f"x{j}", ir.SortType(o.result)) for j in range(1, o.arity - n_prefix + 1)]
    folded: ir.Pattern = operands[0]
    for x in operands[1:]:
        folded = ir.PApp(b.name, (*params, folded, x), NO_SPAN)
    rule = ir.Rule("", (ir.PApp(o.name, (*params, *operands), NO_SPAN),), (folded,), (), (), NO_SPAN)
    return replace(rule, name=stable_name(rule))


def lifted(rule: ir.Rule, b: str, o: str, k: int) -> ir.Rule | None:
    """See the module docstring; the lifted rule's sides keep `rule`'s orientation."""
    if rule.wheres or rule.is_multi:
        return None
    for root, other, root_on_left in ((rule.lhs[0], rule.rhs[0], True), (rule.rhs[0], rule.lhs[0], False)):
        split = _halves(root, b)
        if split is None:
            continue
        prefix, left, pairing = split
        copies = _copies(left, rule, k)
        if copies is None:
            continue
        new_root = ir.PApp(o, (*prefix, *(renamed(left, c) for c in copies)), NO_SPAN)
        new_other = _fan_out(other, b, o, prefix, pairing, copies)
        if new_other is None or _uses_any(new_other, {*pairing, *pairing.values()}):
            continue
        lhs, rhs = (new_root, new_other) if root_on_left else (new_other, new_root)
        if not isinstance(lhs, ir.PApp):
            continue
        conds = tuple(c for cond in rule.conds for c in _conds_per_copy(cond, pairing, copies))
        wider = ir.Rule("", (lhs,), (rhs,), (), conds, NO_SPAN)
        return replace(wider, name=stable_name(wider))
    return None


def operator_count(rule: ir.Rule) -> int:
    """Applications on both sides (a candidate's size)."""
    def count(p: ir.Pattern) -> int:
        return 1 + sum(map(count, p.args)) if isinstance(p, ir.PApp) else 0

    return sum(map(count, (*rule.lhs, *rule.rhs)))


def _halves(p: ir.Pattern, b: str) -> tuple[tuple[ir.Pattern, ...], ir.PApp, dict[str, str]] | None:
    """(`b`'s parameters, L, L's term variables -> R's) where `p` is `b(params.., L, R)` with R a
    renaming of L apart from it; else None."""
    if not isinstance(p, ir.PApp) or p.op != b or len(p.args) < 2:
        return None
    *prefix, left, right = p.args
    pairing: dict[str, str] = {}
    if not isinstance(left, ir.PApp) or not _renaming(left, right, pairing):
        return None
    if set(pairing) & set(pairing.values()) or len(set(pairing.values())) != len(pairing):
        return None
    return tuple(prefix), left, pairing


def _renaming(left: ir.Pattern, right: ir.Pattern, pairing: dict[str, str]) -> bool:
    match left, right:
        case ir.PVar(name=a, type=ir.SortType() as t), ir.PVar(name=c, type=u):
            return t == u and pairing.setdefault(a, c) == c
        case ir.PApp(op=op, args=args), ir.PApp(op=op2, args=args2):
            return op == op2 and len(args) == len(args2) and all(_renaming(x, y, pairing) for x, y in zip(args, args2))
        case _:
            return left == right


def _copies(left: ir.PApp, rule: ir.Rule, k: int) -> list[dict[str, str]] | None:
    """k renamings of L's term variables apart from each other and the rule's (`?a` -> `?a1`..)."""
    taken = set().union(*(pattern_vars(p) for p in (*rule.lhs, *rule.rhs)))
    names = [v for v, t in pattern_vars(left).items() if isinstance(t, ir.SortType)]
    copies = [{v: f"{v}{j}" for v in names} for j in range(1, k + 1)]
    new = [n for c in copies for n in c.values()]
    return None if set(new) & taken or len(set(new)) != len(new) else copies


def _fan_out(p: ir.Pattern, b: str, o: str, prefix: tuple[ir.Pattern, ...], pairing: dict[str, str],
             copies: list[dict[str, str]]) -> ir.Pattern | None:
    """`p` with each `b(prefix.., U, U')` (U' = U with `pairing`) as `o(prefix.., U1, ..., Uk)`."""
    if not isinstance(p, ir.PApp):
        return p
    if p.op == b and tuple(p.args[:-2]) == prefix and renamed(p.args[-2], pairing) == p.args[-1]:
        return ir.PApp(o, (*prefix, *(renamed(p.args[-2], c) for c in copies)), NO_SPAN)
    args = [_fan_out(a, b, o, prefix, pairing, copies) for a in p.args]
    return None if any(a is None for a in args) else ir.PApp(p.op, tuple(args), NO_SPAN)  # type: ignore[arg-type]


def _conds_per_copy(cond: ir.Cond, pairing: dict[str, str], copies: list[dict[str, str]]) -> list[ir.Cond]:
    """The condition asked of every copy (over one half's variables) or of each copy and the next
    (over both)."""
    used = _names(cond)
    back = {r: left for left, r in pairing.items()}
    if not used & {*pairing, *back}:
        return [cond]
    if not used & set(pairing):
        return [renamed(cond, {r: c[back[r]] for r in back}) for c in copies]
    if not used & set(back):
        return [renamed(cond, c) for c in copies]
    return [renamed(cond, {**c, **{r: n[back[r]] for r in back}}) for c, n in zip(copies, copies[1:])]


def _names(x: Any) -> set[str]:
    """The term variables `x` names."""
    if isinstance(x, ir.PVar):
        return {x.name}
    if isinstance(x, ir.ShapeOf):
        return {x.var}
    if isinstance(x, tuple):
        return set().union(*map(_names, x)) if x else set()
    if is_dataclass(x) and not isinstance(x, type):
        return set().union(*(_names(getattr(x, f.name)) for f in fields(x)))
    return set()


def _uses_any(p: ir.Pattern, names: set[str]) -> bool:
    return bool(set(pattern_vars(p)) & names)
