"""A selection of a live e-graph's nodes → the extracted program, as `ir.Program` or `.eqr` text.

Contract: `program_text(live, selection)` prints a program `load_program_text` reads back;
`selection_program` builds the same program directly. Value classes become literal arguments.
`program_selection(live, program)` is the inverse: the selection of a program the e-graph holds
(a loaded one), or None where one of its nodes is not there.
"""
from __future__ import annotations

from eqdsl import ir
from eqdsl.diagnostics import Span
from eqdsl.egglog.live import LiveEGraph
from eqdsl.extract.egraph import Selection, reachable
from eqdsl.ir.evaluate import Value
from eqdsl.ir.text import literal


def _literal(value: Value) -> str:
    assert value is not None
    return literal(value)


INLINE_DEPTH = 16  # deeper terms are cut into `let`s: readable, and parsers need no deep recursion


def program_text(live: LiveEGraph, selection: Selection, name: str = "optimized") -> str:
    """The selection as an `.eqr` program: shared subterms and every `INLINE_DEPTH`-th level of
    a deep term become `let`s, one `root` per root."""
    p = live.problem
    order = reachable(p, selection)
    uses: dict[int, int] = {}
    for c in order:
        for k in p.nodes[selection[c]].children:
            uses[k] = uses.get(k, 0) + 1
    for r in p.roots:
        uses[r] = uses.get(r, 0) + 1
    text: dict[int, str] = {}
    depth: dict[int, int] = {}  # nesting depth of text[c]
    lines = [f"program {name}:"]
    for c in order:
        node = p.nodes[selection[c]]
        cid = p.class_ids[c]
        if cid in live.values:
            text[c], depth[c] = _literal(live.values[cid]), 0
            continue
        expr = f"{node.op}({', '.join(text[k] for k in node.children)})"
        depth[c] = 1 + max((depth[k] for k in node.children), default=0)
        if node.children and (uses.get(c, 0) > 1 or depth[c] >= INLINE_DEPTH):
            lines.append(f"  let t{c} = {expr}")
            text[c], depth[c] = f"t{c}", 0
        else:
            text[c] = expr
    lines += [f"  root {text[r]}" for r in p.roots]
    return "\n".join(lines) + "\n"


def selection_program(live: LiveEGraph, selection: Selection, name: str = "optimized") -> ir.Program:
    """The selection as an `ir.Program` (what `program_text` prints, without the text round trip):
    value classes become literal arguments, every other class one node."""
    p = live.problem
    index: dict[int, int] = {}
    nodes: list[ir.TermNode] = []
    for c in reachable(p, selection):
        cid = p.class_ids[c]
        if cid in live.values:
            continue
        node = p.nodes[selection[c]]
        args = tuple(_literal_arg(live.values[p.class_ids[k]]) if p.class_ids[k] in live.values
                     else ir.Child(index[k]) for k in node.children)
        index[c] = len(nodes)
        nodes.append(ir.TermNode(node.op, args))
    return ir.Program(name, tuple(nodes), tuple(index[r] for r in p.roots), Span("<extracted>", 0, 0))


def _literal_arg(value: Value):
    return tuple(value) if isinstance(value, list) else value



def program_selection(live: LiveEGraph, program: ir.Program) -> Selection | None:
    """The nodes of the e-graph that make up `program`, matched bottom-up by operator and child
    classes; None where a node is missing (or blocked)."""
    matched = program_nodes(live, program)
    if matched is None:
        return None
    p = live.problem
    selection: Selection = {}
    for node, found in zip(program.nodes, matched):
        for a, k in zip(node.args, p.nodes[found].children):
            if not isinstance(a, ir.Child):
                selection[k] = p.class_nodes[k][0]
        # a class holding two of its nodes keeps the first (a descendant of the other: no cycle)
        selection.setdefault(p.nodes[found].eclass, found)
    return selection


def program_nodes(live: LiveEGraph, program: ir.Program) -> list[int] | None:
    """Per node of `program`, the e-node that is it (same operator, same child classes); None
    where one is missing (or blocked)."""
    p = live.problem
    value_class = {_value_key(live.values[cid]): c for c, cid in enumerate(p.class_ids) if cid in live.values}
    by_shape = {(n.op, n.children): i for i, n in enumerate(p.nodes) if p.allowed(i)}
    found: list[int] = []
    for node in program.nodes:
        kids = tuple(p.nodes[found[a.index]].eclass if isinstance(a, ir.Child)
                     else value_class.get(_value_key(a), -1) for a in node.args)
        match = by_shape.get((node.op, kids))
        if match is None:
            return None
        found.append(match)
    return found


def _value_key(value) -> tuple[str, object]:
    """A literal as a dict key: its type with it (True and 1 are different literals)."""
    return type(value).__name__, tuple(value) if isinstance(value, (list, tuple)) else value
