"""What a form of a goal costs (`eqdsl.synth.goals`): terms priced at the goal's real shapes, and
each enumerated class's cheapest term.

Contract: `Pricing(lang, costs, shapes, constant, real)` prices a pattern over the goal's variables
with the target's cost rules (`costs`) at their real shapes (`shapes`; a list literal at the small
stand-in sizes is mapped back through `real`, a permutation, which holds a 0, kept): a variable
costs nothing, an application its cost rule's price at its operands' shapes plus its operands',
and one whose operands are all constant (variables in `constant`, or what only they compute:
weights, folded before the program runs) nothing; one its shape rule refuses at the real shapes
(valid only at the stand-in sizes) is infinitely dear. A tree is priced as a tree: a subterm it holds
twice counts twice (a bound above its DAG price). `cheapest(found, pricing)` gives each class of an
enumeration its cheapest term as the enumeration's terms build it, bottom-up, each application
over its operands' classes' cheapest terms (an enumeration keeps one term per class as a child:
the first; the cheapest may be another, `conv2d(?a, ewmul(?b, ?d))` where `ewmul(conv2d(?a, ?b),
?d)` came first).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

from eqdsl import ir
from eqdsl.cost.model import Request, RuleCosts, cost_reads
from eqdsl.diagnostics import NO_SPAN
from eqdsl.ir.evaluate import ShapeViolation, application_shape
from eqdsl.ir.text import pattern_text
from eqdsl.synth.enumerate import Enumeration


class Priced(NamedTuple):
    shape: Any  # at the real sizes (a literal's value for a literal)
    cost: float
    constant: bool
    pattern: ir.Pattern


class Pricing:
    """See the module docstring."""

    def __init__(self, lang: ir.Language, costs: RuleCosts, shapes: dict[str, tuple[int, ...]],
                 constant: frozenset[str], real: dict[int, int]) -> None:
        self.lang, self.costs, self.shapes, self.constant, self.real = lang, costs, shapes, constant, real

    def price(self, p: ir.Pattern) -> Priced:
        if isinstance(p, ir.PApp):
            return self.node(p.op, [self.price(a) for a in p.args])
        return self.leaf(p)

    def leaf(self, p: ir.Pattern) -> Priced:
        match p:
            case ir.PVar(name=name):
                return Priced(self.shapes.get(name), 0.0, name in self.constant, p)
            case ir.PLit(value=tuple() as small):
                return Priced(small if 0 in small else tuple(self.real[d] for d in small), 0.0, True, p)
            case ir.PLit(value=value):
                return Priced(value, 0.0, True, p)
        raise AssertionError(p)

    def node(self, op: str, parts: list[Priced]) -> Priced:
        shapes = tuple(part.shape for part in parts)
        out = self._shape(op, shapes)
        below = sum(part.cost for part in parts)
        constant = all(part.constant for part in parts)
        pattern = ir.PApp(op, tuple(part.pattern for part in parts), NO_SPAN)
        if out is None and op in self.lang.shapes:  # valid at the small sizes, not at the real ones
            return Priced(None, math.inf, False, pattern)
        if constant or op not in self.lang.costs:
            return Priced(out, below, constant, pattern)
        reads = cost_reads(self.lang.costs[op])
        return Priced(out, below + self.costs.cost(Request(op, shapes, out, (None,) * len(reads))), False, pattern)

    def _shape(self, op: str, args: tuple[Any, ...]) -> Any:
        try:
            return application_shape(self.lang, op, list(args))
        except ShapeViolation:
            return None


def cheapest(found: Enumeration, pricing: Pricing) -> tuple[dict[int, Priced], dict[str, int]]:
    """(class → its cheapest term, a class's first term's text → the class); see the module docstring."""
    class_of = {pattern_text(found.terms[k].pattern): k for k in found.classes.values()}
    best: dict[int, Priced] = {}
    for term in found.terms:
        priced = best_version(term.pattern, best, class_of, pricing)
        k = found.classes[term.fingerprint]
        if k not in best or priced.cost < best[k].cost:
            best[k] = priced
    return best, class_of


def best_version(p: ir.Pattern, best: dict[int, Priced], class_of: dict[str, int], pricing: Pricing) -> Priced:
    """`p` priced with each operand the cheapest term of its class."""
    if not isinstance(p, ir.PApp):
        return pricing.leaf(p)
    parts = []
    for a in p.args:
        if isinstance(a, ir.PLit):
            parts.append(pricing.leaf(a))
            continue
        k = class_of.get(pattern_text(a))
        parts.append(best[k] if k in best else best_version(a, best, class_of, pricing))
    return pricing.node(p.op, parts)
