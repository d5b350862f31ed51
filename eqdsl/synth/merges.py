"""Multi-pattern rules of `eqdsl synthesize` as TASO has them: two applications of one operator
merged into one application over joined operands, and the two results split back out.

Contract: `joints(lang, sem, rank)` finds how a language puts two values side by side and takes
them apart again (a `Joint`): TASO's `concat(axis, a, b)` with `split(axis, at, x)`, `split0`,
`split1` (by their names), and, from the reference semantics, every operator `J(a, b)` of two
operands of one shaped sort with two operators `P0(k, x)`, `P1(k, x)` that give back `a` and `b`
from `J(a, b)` at `k = shape(a)[d]` for one dimension d (`k = shape(a)` for a vector's `Int` shape;
the first language's `concat`, `cols-before`, `cols-from`, at d = 1). `merge_candidates(lang, pool,
found)` lifts each single-pattern candidate equation `J(L1, L2) = T` of `pool` (either orientation,
no conditions) where L1 and L2 are different applications of one operator with the same literal
parameters, and T applies that operator once and J once, over the variables of L1 and L2 only, to the joint rewrite

    L1, L2 => P0(k, T), P1(k, T) where k = shape(L1)[d]

(TASO's m05: `matmul(?a, ?b), matmul(?a, ?c)` to one matmul over `concat(1, ?b, ?c)`, split by
`split0(split(1, k, T))`). The equation is only where the rewrite came from: `synthesize`
verifies each lifted rule as a rule of its own and finds its shape conditions. `guarded` adds
TASO's `if ?b != ?c` on the first variables where L1 and L2 differ, so that a term is not merged
with itself (the rule holds when the two are equal too: the guard only saves work). The pairs are
those the enumeration's joined terms hold: two terms of up to `--size - 1` operators in all. A
language with no joint gets none.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from eqdsl import ir
from eqdsl.diagnostics import NO_SPAN
from eqdsl.synth.candidates import Candidate, cheapest_first, matches, stable_name, variables
from eqdsl.verify.semantics import SemanticsError, apply

TASO_OPS = {"concat": 3, "split": 3, "split0": 1, "split1": 1}  # operator → its arity
TRIES = 2  # random draws a joint must give back exactly


@dataclass(frozen=True)
class Joint:
    """`join` puts two values side by side along dimension `dim` (its first parameter where
    `dim` is None: TASO's axis literal); `parts` are the operators that take the first and the
    second back at `k`, None for TASO's `split0(split(axis, k, x))`, `split1(...)`."""

    join: str
    dim: int | None = None
    parts: tuple[str, str] | None = None

    def split(self, k: ir.Pattern, whole: ir.Pattern, axis: int) -> tuple[ir.Pattern, ir.Pattern]:
        if self.parts is None:
            split = ir.PApp("split", (ir.PLit(axis, ir.Prim.INT), k, whole), NO_SPAN)
            return ir.PApp("split0", (split,), NO_SPAN), ir.PApp("split1", (split,), NO_SPAN)
        return ir.PApp(self.parts[0], (k, whole), NO_SPAN), ir.PApp(self.parts[1], (k, whole), NO_SPAN)

    def operands(self, joined: ir.Pattern) -> tuple[int, ir.PApp, ir.PApp] | None:
        """(the dimension joined along, the two joined applications) of a `join` term."""
        match joined:
            case ir.PApp(op=op, args=(ir.PLit(value=int() as axis), ir.PApp() as one, ir.PApp() as two)) \
                    if op == self.join and self.dim is None:
                return axis, one, two
            case ir.PApp(op=op, args=(ir.PApp() as one, ir.PApp() as two)) if op == self.join and self.dim is not None:
                return self.dim, one, two
        return None


def joints(lang: ir.Language, sem: dict[str, Any], rank: int) -> list[Joint]:
    """The language's joints (see the module docstring), found at values of `rank` dimensions."""
    found = [Joint("concat")] if all(op in lang.ops and lang.ops[op].arity == arity
                                     for op, arity in TASO_OPS.items()) else []
    for join in lang.ops.values():
        sorts = [p.type for p in join.params]
        if len(sorts) != 2 or sorts[0] != sorts[1] or sorts[0] != ir.SortType(join.result) \
                or lang.sorts[join.result].shape_type is None:
            continue
        parts = [op.name for op in lang.ops.values() if op.result == join.result and len(op.params) == 2
                 and {p.type for p in op.params} == {ir.Prim.INT, sorts[0]}]
        vectors = lang.sorts[join.result].holds_vectors
        found += [Joint(join.name, dim, (first, second)) for dim in range(1 if vectors else rank)
                  for first, second in itertools.permutations(parts, 2)
                  if _gives_back(lang, sem, join.name, dim, 1 if vectors else rank, (first, second))]
    return found


def _gives_back(lang: ir.Language, sem: dict[str, Any], join: str, dim: int, rank: int,
                parts: tuple[str, str]) -> bool:
    """Whether `parts` take back exactly both operands of `join` at k = their size along `dim`,
    on random operands of distinct dimensions (2, 3, ...: no size stands in for another)."""
    if any(op not in sem for op in (join, *parts)):
        return False
    rng = np.random.default_rng(0)
    shape = tuple(range(2, 2 + rank))
    for _ in range(TRIES):
        a, b = rng.standard_normal(shape), rng.standard_normal(shape)
        try:
            whole = apply(sem, join, [a, b])
            back = [apply(sem, p, _in_order(lang.ops[p], shape[dim], whole)) for p in parts]
        except SemanticsError:
            return False
        if not all(isinstance(x, np.ndarray) and x.shape == y.shape and np.array_equal(x, y)
                   for x, y in zip(back, (a, b))):
            return False
    return True


def _in_order(op: ir.Operator, k: int, operand: Any) -> list[Any]:
    return [k if p.type == ir.Prim.INT else operand for p in op.params]


def merge_candidates(lang: ir.Language, pool: list[Candidate], found: list[Joint]) -> list[Candidate]:
    """The joint rewrites lifted from `pool`'s equations at the joints `found` (see the module
    docstring), cheapest first."""
    lifted: dict[str, Candidate] = {}
    for c in pool:
        if c.rule.is_multi or c.rule.conds or c.rule.wheres:
            continue
        for joint in found:
            for joined, merged in ((c.rule.lhs[0], c.rule.rhs[0]), (c.rule.rhs[0], c.rule.lhs[0])):
                rule = _lifted(lang, joint, joined, merged)
                if rule is not None:
                    candidate = replace(c, rule=rule)
                    lifted.setdefault(candidate.text, candidate)
    return sorted(lifted.values(), key=cheapest_first)


def _lifted(lang: ir.Language, joint: Joint, joined: ir.Pattern, merged: ir.Pattern) -> ir.Rule | None:
    operands = joint.operands(joined)
    if operands is None:
        return None
    axis, one, two = operands
    if not (_one_operator(one, two) and isinstance(merged, ir.PApp) and _count(merged, one.op) == 1
            and _count(merged, joint.join) == 1 and variables(merged) <= variables(one) | variables(two)):
        return None
    sort = lang.sorts[lang.ops[one.op].result]
    if sort.shape_type is None:
        return None
    at: ir.Expr = ir.ShapeOfTerm(one, sort.shape_type) if sort.holds_vectors else \
        ir.IndexOf(ir.ShapeOfTerm(one, sort.shape_type), ir.Const(axis, ir.Prim.INT), ir.Prim.INT)
    rhs = joint.split(ir.PBound("k", ir.Prim.INT), merged, axis)
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

