"""Deliberately unsound variants of rules, for the mutation test of `eqdsl verify`."""
from __future__ import annotations

from dataclasses import replace

from eqdsl import ir

NON_COMMUTATIVE = {"matmul": (1, 2), "concat": (1, 2), "div": (0, 1), "cols-before": None}


def _rewrite_first(p: ir.Pattern, change) -> tuple[ir.Pattern, bool]:
    """Apply `change` to the first application (pre-order) it accepts; (pattern, changed?)."""
    if isinstance(p, ir.PApp):
        new = change(p)
        if new is not None:
            return new, True
        args = list(p.args)
        for i, a in enumerate(args):
            args[i], done = _rewrite_first(a, change)
            if done:
                return replace(p, args=tuple(args)), True
    return p, False


def _on_rhs(rule: ir.Rule, change, suffix: str) -> ir.Rule | None:
    rhs = list(rule.rhs)
    for i, side in enumerate(rhs):
        rhs[i], done = _rewrite_first(side, change)
        if done:
            return replace(rule, name=f"{rule.name}~{suffix}", rhs=tuple(rhs))
    return None


def swap_arguments(rule: ir.Rule) -> ir.Rule | None:
    def change(p: ir.PApp):
        pos = NON_COMMUTATIVE.get(p.op)
        if pos and len(p.args) > max(pos) and p.args[pos[0]] != p.args[pos[1]]:
            args = list(p.args)
            args[pos[0]], args[pos[1]] = args[pos[1]], args[pos[0]]
            return replace(p, args=tuple(args))
        return None
    return _on_rhs(rule, change, "swap")


def change_constant(rule: ir.Rule) -> ir.Rule | None:
    """The last integer literal of the first application on the right that has one (an
    activation code, axis, count or number) + 1. Not a stride: on a 1-pixel image a stride-2
    SAME convolution equals the stride-1 one, so such a mutant can be sound where it applies."""
    def change(p: ir.PApp):
        for i, a in reversed(list(enumerate(p.args))):
            if isinstance(a, ir.PLit) and isinstance(a.value, int):
                args = list(p.args)
                args[i] = ir.PLit(a.value + 1, a.type)
                return replace(p, args=tuple(args))
        return None
    return _on_rhs(rule, change, "const")


def drop_transpose(rule: ir.Rule) -> ir.Rule | None:
    return _on_rhs(rule, lambda p: p.args[0] if p.op == "transpose" else None, "notranspose")


def shift_split_point(rule: ir.Rule) -> ir.Rule | None:
    if not rule.wheres:
        return None
    name, expr = rule.wheres[0]
    moved = ir.BinOp("sub", expr, ir.Const(1, ir.Prim.INT), ir.Prim.INT)
    return replace(rule, name=f"{rule.name}~splitpoint", wheres=((name, moved),) + rule.wheres[1:])


MUTATIONS = (swap_arguments, change_constant, drop_transpose, shift_split_point)


def mutants(rules) -> list[ir.Rule]:
    return [m for rule in rules for mutate in MUTATIONS if (m := mutate(rule)) is not None]
