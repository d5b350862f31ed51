"""Cycle filtering during exploration (TENSAT §4.2), with egglog's `subsume` as the filter list.

Contract: `CycleFilter.apply(session)` reads the frozen e-graph, finds a set of nodes whose
removal makes the part reachable from the roots acyclic, and subsumes them: a subsumed node is
never matched again and never extracted. Removal never leaves a root without a finite program:
a class that would lose its last usable node keeps its oldest one (that cycle is then left to
the extractor's order constraints and counted in `FilterReport.kept`).

Two algorithms (TENSAT §4.2, Table 6):
- efficient: one depth-first walk per pass finds the cycles; of each, the node added most recently
  (age = the filter pass that first saw it) goes; see `eqdsl.graphs.filter_cycles`.
- vanilla: every node added since the last pass is checked on its own, oldest first, by a
  reachability search (does its class reach itself through its children?), and goes if it would
  close a cycle — TENSAT's check before each rewrite application, made after the batch because
  egglog applies an iteration's matches together. Cost: a graph search per new node. Cycles made
  by merges alone (no new node) are then removed as in `efficient`.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import AbstractSet

from eqdsl.egglog.session import EGraphSession, FrozenGraph
from eqdsl.graphs import filter_cycles, reaches


@dataclass(frozen=True)
class FilterReport:
    removed: int  # nodes subsumed by this pass
    kept: int  # back-edge nodes kept so that their class stays extractable


@dataclass
class CycleFilter:
    """One per run: remembers when each node was first seen (its age)."""

    vanilla: bool = False
    first_seen: dict[tuple, int] = field(default_factory=dict)
    passes: int = 0

    def snapshot(self) -> "CycleFilter":
        return CycleFilter(self.vanilla, dict(self.first_seen), self.passes)

    def restore(self, state: "CycleFilter") -> None:
        """Back to `state` (a `snapshot()`), which stays as it is."""
        self.first_seen, self.passes = dict(state.first_seen), state.passes

    def apply(self, session: EGraphSession) -> FilterReport:
        graph = session.frozen()
        self.passes += 1
        ages = [self.first_seen.setdefault(n.key, self.passes) for n in graph.nodes]
        cut = closing_nodes(graph, ages, self.passes) if self.vanilla else set()
        cut |= back_edge_nodes(graph, ages, cut)
        witness, kept = repair(graph, cut, ages)
        subsumed = [i for i in sorted(cut) if all(k in witness for k in graph.nodes[i].children)]
        if subsumed:
            session.subsume(graph, subsumed, witness)
        return FilterReport(len(subsumed), kept)


def _class_members(graph: FrozenGraph, ages: list[int]) -> dict[str, list[int]]:
    members: dict[str, list[int]] = defaultdict(list)
    for i, node in enumerate(graph.nodes):
        if not node.subsumed:
            members[node.eclass].append(i)
    for nodes in members.values():
        nodes.sort(key=lambda i: ages[i])
    return members


def closing_nodes(graph: FrozenGraph, ages: list[int], newest: int) -> set[int]:
    """Vanilla: nodes of age `newest`, oldest index first, each cut if its class is reachable
    from one of its children through the nodes kept so far."""
    kept: dict[str, list[str]] = defaultdict(list)  # class → child classes through kept nodes
    new = []
    for i, node in enumerate(graph.nodes):
        if node.subsumed:
            continue
        if ages[i] == newest:
            new.append(i)
        else:
            kept[node.eclass].extend(node.children)
    cut = set()
    for i in new:
        node = graph.nodes[i]
        if reaches(node.children, lambda c: kept.get(c, ()), node.eclass):
            cut.add(i)
        else:
            kept[node.eclass].extend(node.children)
    return cut




def back_edge_nodes(graph: FrozenGraph, ages: list[int], already: AbstractSet[int] = frozenset()) -> set[int]:
    """Efficient: the youngest node of each cycle met depth-first from the roots (each class's
    nodes oldest first; among equally young nodes, the one closing the cycle). Nodes in
    `already` count as removed."""
    members = _class_members(graph, ages)

    def edges(cls: str):
        return [(i, kid) for i in members.get(cls, ()) if i not in already for kid in graph.nodes[i].children]

    def youngest(cycle):
        return max(reversed(cycle), key=lambda i: ages[i])

    return filter_cycles(graph.roots, edges, youngest)


def repair(graph: FrozenGraph, cut: set[int], ages: list[int]) -> tuple[dict[str, int], int]:
    """Give back cut nodes until every root class has a finite program; return each usable
    class's witness node (Knuth order: its first node whose children all had one) and how many
    cut nodes were given back (`cut` is updated in place)."""
    kept = 0
    while True:
        witness = witnesses(graph, cut)
        missing = [r for r in graph.roots if r not in witness]
        if not missing:
            return witness, kept
        restore = _oldest_cut_per_class(graph, cut, ages, set(witness))
        if not restore:
            return witness, kept  # the input itself has no finite program here: nothing to give
        cut.difference_update(restore)
        kept += len(restore)


def witnesses(graph: FrozenGraph, cut: set[int]) -> dict[str, int]:
    """Each class with a finite program avoiding the nodes in `cut` (and subsumed ones) → its
    first node, in Knuth order, whose children all have one: following witnesses from a class
    never returns to it."""
    waiting: dict[str, list[int]] = defaultdict(list)
    pending = [0] * len(graph.nodes)
    ready = []
    for i, node in enumerate(graph.nodes):
        if node.subsumed or i in cut:
            continue
        kids = set(node.children)
        pending[i] = len(kids)
        for k in kids:
            waiting[k].append(i)
        if not kids:
            ready.append(i)
    witness: dict[str, int] = {}
    while ready:
        i = ready.pop()
        cls = graph.nodes[i].eclass
        if cls in witness:
            continue
        witness[cls] = i
        for j in waiting.get(cls, ()):
            pending[j] -= 1
            if pending[j] == 0:
                ready.append(j)
    return witness


def _oldest_cut_per_class(graph: FrozenGraph, cut: set[int], ages: list[int], usable: set[str]) -> list[int]:
    best: dict[str, int] = {}
    for i in cut:
        cls = graph.nodes[i].eclass
        if cls not in usable and (cls not in best or ages[i] < ages[best[cls]]):
            best[cls] = i
    return list(best.values())
