"""Warnings about a checked language: what egglog accepts but may not mean what its author reads.

Contract: `guard_warnings(lang)` returns one warning `Diagnostic` per `!=` guard between terms
(`ir.ClassCond(equal=False)`), in source order. egglog reads such a guard as "the two e-classes
are not known to be equal *now*", never as "the values differ": a rule guarded by it is sound
only if it also holds where both sides have the same value (`eqdsl verify` checks it that way).
Comparisons of primitive values (`?n != 0` over `Int`, shapes, strings) are not warned about:
they are value comparisons.
"""
from __future__ import annotations

from eqdsl import ir
from eqdsl.diagnostics import Diagnostic
from eqdsl.ir.text import pattern_text


def guard_warnings(lang: ir.Language) -> list[Diagnostic]:
    found = []
    for rule in lang.rules:
        for cond in rule.conds:
            if isinstance(cond, ir.ClassCond) and not cond.equal:
                found.append(_disequality_warning(rule, cond))
    return found


def _disequality_warning(rule: ir.Rule, cond: ir.ClassCond) -> Diagnostic:
    guard = f"{pattern_text(cond.left)} != {pattern_text(cond.right)}"
    return Diagnostic(
        f"rule {rule.name}: `{guard}` compares e-classes, not values: egglog applies the rule "
        "whenever the two are not known to be equal yet, so the rule must also hold where both "
        "sides have the same value",
        cond.span or rule.span, level="warning",
        notes=("to guard on a value, compare primitives (`div(num(?n), num(?n)) => num(1) if ?n != 0`); "
               "`eqdsl verify` checks the rule with equal values drawn too",))
