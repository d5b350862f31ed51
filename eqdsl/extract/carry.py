"""A program carried from one e-graph to a later one: the start an exact extractor is given.

A schedule that extracts again and again (pulsed epochs, MCTS pricing every state) extracts from
e-graphs that grew from one another, so the last program it found is still in the next e-graph —
under other class ids. `Sketch` holds a selection without ids: its nodes children-first, each as
(op, positions of its children in the sketch), and the roots' positions. `sketch(problem,
selection)` makes one; `place(sketch, problem)` finds the same nodes in another problem (each node
by its op and its children's classes: egglog hash-conses, so that names one node) and returns the
selection there, or None where a node is missing, blocked or not named by them alone (e-graphs
not from egglog can repeat an op and children in two classes), or the roots differ. Where two
classes of the old e-graph are one in the new, the class keeps the node placed first, so the
program only loses nodes (never dearer under the same costs) and stays acyclic (the first node
of a class has children placed before it; `restrict` checks it all the same). A sketch of a few
hundred nodes takes a few kilobytes: MCTS keeps one per tree state.
"""
from __future__ import annotations

from dataclasses import dataclass

from eqdsl.extract.egraph import (
    CyclicSelection,
    ExtractionProblem,
    IncompleteSelection,
    Selection,
    reachable,
    restrict,
)

AMBIGUOUS = -1  # `_node_index`: no node, or several


@dataclass(frozen=True)
class Sketch:
    nodes: tuple[tuple[str, tuple[int, ...]], ...]  # (op, child positions), children first
    roots: tuple[int, ...]  # positions of the roots, in root order


def sketch(problem: ExtractionProblem, selection: Selection) -> Sketch:
    """`selection` must be complete and acyclic for `problem`'s roots."""
    position: dict[int, int] = {}
    nodes: list[tuple[str, tuple[int, ...]]] = []
    for c in reachable(problem, selection):
        node = problem.nodes[selection[c]]
        position[c] = len(nodes)
        nodes.append((node.op, tuple(position[k] for k in node.children)))
    return Sketch(tuple(nodes), tuple(position[r] for r in problem.roots))


def place(s: Sketch, problem: ExtractionProblem) -> Selection | None:
    """The sketch's program as a selection of `problem`, or None where it is not all there."""
    index = _node_index(problem)
    classes: list[int] = []
    selection: Selection = {}
    for op, kids in s.nodes:
        found = index.get((op, tuple(classes[k] for k in kids)), AMBIGUOUS)
        if found == AMBIGUOUS:
            return None
        eclass = problem.nodes[found].eclass
        classes.append(eclass)
        selection.setdefault(eclass, found)  # merged classes keep the first node; checked below
    if tuple(classes[r] for r in s.roots) != problem.roots:
        return None
    try:
        return restrict(problem, selection)
    except (CyclicSelection, IncompleteSelection):
        return None


def _node_index(problem: ExtractionProblem) -> dict[tuple[str, tuple[int, ...]], int]:
    """(op, child classes) → the allowed node, or `AMBIGUOUS` where several have them."""
    index: dict[tuple[str, tuple[int, ...]], int] = {}
    for i, node in enumerate(problem.nodes):
        if problem.allowed(i):
            key = (node.op, node.children)
            index[key] = AMBIGUOUS if key in index else i
    return index
