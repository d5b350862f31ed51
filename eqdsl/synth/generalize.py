"""Literal parameters lifted to variables, as Ruler generalizes: a rule found at one value of an
operator's parameter (`relu(conv2d(1, 1, 0, 0, ?a, ?b)) => conv2d(1, 1, 0, 2, ?a, ?b)`, the
enumeration saw stride 1 and padding 0 only) often holds at every value
(`relu(conv2d(?i0, ?i1, ?i2, 0, ?a, ?b)) => conv2d(?i0, ?i1, ?i2, 2, ?a, ?b)`).

Contract: `generalized(rule, holds)` lifts the slots of `rule` — an operator's Int parameter
position on the left side whose literals are one value wherever the operator appears, on either
side and in `where`s — each to a fresh Int variable at all its places: every slot at once, and
where that does not hold, each slot in order of first appearance, kept where `holds(rule)` says
the more general rule holds (`verify` at examples drawn over the new variables too). A slot with
different values on the two sides (`act` 0 on the left, 2 on the right) stays literal. Returns
the most general rule found (the input where none holds), named stably.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any, Callable, Iterator

from eqdsl import ir
from eqdsl.synth.candidates import rewritten, stable_name, variables

Slot = tuple[str, int]  # an operator and the position of one of its parameters


def generalized(rule: ir.Rule, holds: Callable[[ir.Rule], bool]) -> ir.Rule:
    """See the module docstring."""
    slots = _slots(rule)
    if len(slots) > 1 and holds(everywhere := _lifted_rule(rule, slots)):
        return everywhere  # the common case, in one check
    current = rule
    for slot in slots:
        if holds(wider := _lifted_rule(current, [slot])):
            current = wider
    return current


def _lifted_rule(rule: ir.Rule, slots: list[Slot]) -> ir.Rule:
    """`rule` with each of `slots` a fresh Int variable wherever it holds a literal."""
    for slot in slots:
        name = _fresh(rule)
        rule = replace(rule, lhs=_deep(rule.lhs, slot, name), rhs=_deep(rule.rhs, slot, name),
                       wheres=_deep(rule.wheres, slot, name), conds=_deep(rule.conds, slot, name))
    return replace(rule, name=stable_name(rule))


def _slots(rule: ir.Rule) -> list[Slot]:
    """The slots whose literals are one Int value across both sides, in order of appearance
    (a slot that holds a variable or a term anywhere is not one value)."""
    values: dict[Slot, set[int | str]] = {}
    mixed: set[Slot] = set()
    for left in rule.lhs:
        _collect(left, values, mixed)
    on_left = list(values)  # a variable only the right side had would be bound by nothing
    for right in _apps((rule.rhs, rule.wheres, rule.conds)):
        _collect(right, values, mixed)
    return [slot for slot in on_left if len(values[slot]) == 1 and slot not in mixed]


def _collect(p: ir.Pattern, values: dict[Slot, set[int | str]], mixed: set[Slot]) -> None:
    if not isinstance(p, ir.PApp):
        return
    for k, arg in enumerate(p.args):
        if isinstance(arg, ir.PLit) and arg.type == ir.Prim.INT:
            values.setdefault((p.op, k), set()).add(arg.value)
        else:
            mixed.add((p.op, k))
        _collect(arg, values, mixed)


def _apps(x: object) -> Iterator[ir.PApp]:
    """The outermost applications anywhere in `x` (a side, a `where`'s `shape(term)`)."""
    if isinstance(x, ir.PApp):
        yield x
    elif isinstance(x, tuple):
        for item in x:
            yield from _apps(item)
    elif is_dataclass(x) and not isinstance(x, type):
        for f in fields(x):
            yield from _apps(getattr(x, f.name))


def _deep(x: Any, slot: Slot, name: str) -> Any:
    """`x` with the slot lifted in every application it holds (sides, `where`s, conditions)."""
    def lift(node: Any) -> Any:
        if not isinstance(node, ir.PApp):
            return None
        return replace(node, args=tuple(ir.PVar(name, ir.Prim.INT) if (node.op, k) == slot and isinstance(a, ir.PLit)
                                        else _deep(a, slot, name) for k, a in enumerate(node.args)))

    return rewritten(x, lift)


def _fresh(rule: ir.Rule) -> str:
    taken = set().union(*(variables(p) for p in (*rule.lhs, *rule.rhs)))
    return next(f"i{k}" for k in range(len(taken) + 1) if f"i{k}" not in taken)
