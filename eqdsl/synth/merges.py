"""Multi-pattern rules of `eqdsl synthesize` as TASO has them: two applications of one operator
merged into one application over concatenated operands, and the two results split back out.

Contract: `merge_candidates(lang, pool)` lifts each single-pattern candidate equation
`concat(ax, L1, L2) = T` of `pool` (either orientation, no conditions) where L1 and L2 are
different applications of one operator with the same literal parameters, and T applies that
operator once and `concat` once, over the variables of L1 and L2 only, to the joint rewrite

    L1, L2 => split0(split(ax, k, T)), split1(split(ax, k, T)) where k = shape(L1)[ax]

(TASO's m05: `matmul(?a, ?b), matmul(?a, ?c)` to one matmul over `concat(1, ?b, ?c)`). The
equation is only where the rewrite came from: `synthesize` verifies each lifted rule as a rule of
its own and finds its shape conditions. `guarded` adds TASO's `if ?b != ?c` on the first
variables where L1 and L2 differ, so that a term is not merged with itself (the rule holds when
the two are equal too: the guard only saves work). The pairs are those the enumeration's
`concat` terms hold: two terms of up to `--size - 1` operators in all. A language without
`concat(axis, a, b)`, `split(axis, at, x)`, `split0` and `split1` gets none.
"""
from __future__ import annotations

from dataclasses import replace

from eqdsl import ir
from eqdsl.diagnostics import NO_SPAN
from eqdsl.synth.candidates import Candidate, cheapest_first, matches, stable_name, variables

MERGE_OPS = {"concat": 3, "split": 3, "split0": 1, "split1": 1}  # operator → its arity


def merge_candidates(lang: ir.Language, pool: list[Candidate]) -> list[Candidate]:
    """The joint rewrites lifted from `pool`'s equations (see the module docstring), cheapest first."""
    if any(op not in lang.ops or lang.ops[op].arity != arity for op, arity in MERGE_OPS.items()):
        return []
    lifted: dict[str, Candidate] = {}
    for c in pool:
        if c.rule.is_multi or c.rule.conds or c.rule.wheres:
            continue
        for joined, merged in ((c.rule.lhs[0], c.rule.rhs[0]), (c.rule.rhs[0], c.rule.lhs[0])):
            rule = _lifted(lang, joined, merged)
            if rule is not None:
                candidate = replace(c, rule=rule)
                lifted.setdefault(candidate.text, candidate)
    return sorted(lifted.values(), key=cheapest_first)


def _lifted(lang: ir.Language, joined: ir.Pattern, merged: ir.Pattern) -> ir.Rule | None:
    match joined:
        case ir.PApp(op="concat", args=(ir.PLit(value=int() as axis), ir.PApp() as one, ir.PApp() as two)):
            pass
        case _:
            return None
    if not (_one_operator(one, two) and isinstance(merged, ir.PApp) and _count(merged, one.op) == 1
            and _count(merged, "concat") == 1 and variables(merged) <= variables(one) | variables(two)):
        return None
    sort = lang.ops[one.op].result
    shape_type = lang.sorts[sort].shape_type
    if shape_type is None:
        return None
    at = ir.IndexOf(ir.ShapeOfTerm(one, shape_type), ir.Const(axis, ir.Prim.INT), ir.Prim.INT)
    split = ir.PApp("split", (ir.PLit(axis, ir.Prim.INT), ir.PBound("k", ir.Prim.INT), merged), NO_SPAN)
    rhs = (ir.PApp("split0", (split,), NO_SPAN), ir.PApp("split1", (split,), NO_SPAN))
    rule = ir.Rule("", (one, two), rhs, (("k", at),), (), NO_SPAN)
    return replace(rule, name=stable_name(rule))


def _one_operator(one: ir.PApp, two: ir.PApp) -> bool:
    """Two different applications of one operator with the same literal parameters."""
    return one.op == two.op and one != two and len(one.args) == len(two.args) and all(
        a == b for a, b in zip(one.args, two.args) if isinstance(a, ir.PLit) or isinstance(b, ir.PLit))


def _count(p: ir.Pattern, op: str) -> int:
    if not isinstance(p, ir.PApp):
        return 0
    return (p.op == op) + sum(_count(a, op) for a in p.args)


def guarded(candidate: Candidate) -> Candidate:
    """The merge with `if ?x != ?y` on the first variables where its two left patterns differ."""
    pair = _first_difference(*candidate.rule.lhs[:2])
    if pair is None:
        return candidate
    rule = replace(candidate.rule, conds=(*candidate.rule.conds, ir.ClassCond(False, *pair)))
    return replace(candidate, rule=replace(rule, name=stable_name(rule)))


def _first_difference(one: ir.Pattern, two: ir.Pattern) -> tuple[ir.PVar, ir.PVar] | None:
    match one, two:
        case ir.PVar(), ir.PVar() if one != two:
            return one, two
        case ir.PApp(args=left), ir.PApp(args=right) if len(left) == len(right):
            return next((d for a, b in zip(left, right) if (d := _first_difference(a, b)) is not None), None)
    return None


def instance_of(general: Candidate, special: Candidate) -> bool:
    """Whether `special` is `general` with variables bound (consistently across its left and
    right patterns), and `general` has no shape conditions: it then rewrites whatever `special`
    does, to the same merge."""
    if any(isinstance(c, ir.ExprCond) for c in general.rule.conds):
        return False
    bound: dict[str, ir.Pattern] = {}
    sides = [(general.rule.lhs, special.rule.lhs), (general.rule.rhs, special.rule.rhs)]
    return all(len(g) == len(s) and all(matches(p, q, bound) for p, q in zip(g, s)) for g, s in sides)

