"""Rule patterns matched on a program's nodes: which rules' right sides a result is made of.

Contract: `built_by(rules, program, nodes)` counts, per rule, the nodes among `nodes` (indices of
`program`, typically those whose terms the input did not have) where one of the rule's right
sides matches and none of its left sides does: the rule's result is there and its start is not,
so the node is evidence of the rule (a commutativity rule, whose sides look alike, never counts).
Right sides that are a bare variable (`mul(?x, num(1)) => ?x`) leave no node behind and are not
counted; conditions are not checked (a name bound by `where` matches any literal). egglog keeps
no record of which rule made a node: this is what the program itself shows.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from eqdsl import ir

_Binding = tuple[str, object]  # ("node", index) or ("literal", value)


def built_by(rules: Iterable[ir.Rule], program: ir.Program, nodes: Iterable[int]) -> Counter[str]:
    counts: Counter[str] = Counter()
    chosen = list(nodes)
    for rule in rules:
        rights = [p for p in rule.rhs if isinstance(p, ir.PApp)]
        for i in chosen:
            if any(_at(p, i, program, {}) for p in rights) and not any(_at(p, i, program, {}) for p in rule.lhs):
                counts[rule.name] += 1
    return counts


def _at(p: ir.Pattern, node: int, program: ir.Program, bound: dict[str, _Binding]) -> bool:
    """Whether application pattern `p` matches the program's node `node` (bindings in `bound`)."""
    if not isinstance(p, ir.PApp):
        return False
    term = program.nodes[node]
    if term.op != p.op or len(term.args) != len(p.args):
        return False
    return all(_arg(a, arg, program, bound) for a, arg in zip(p.args, term.args))


def _arg(p: ir.Pattern, arg: object, program: ir.Program, bound: dict[str, _Binding]) -> bool:
    match p:
        case ir.PApp():
            return isinstance(arg, ir.Child) and _at(p, arg.index, program, bound)
        case ir.PVar(name=name) | ir.PBound(name=name):
            value: _Binding = ("node", arg.index) if isinstance(arg, ir.Child) else ("literal", arg)
            return bound.setdefault(name, value) == value
        case ir.PLit(value=v):
            return not isinstance(arg, ir.Child) and arg == v
    return False
