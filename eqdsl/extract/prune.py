"""Pruning before the CP-SAT model: the e-nodes an optimal extraction provably never needs.

Steps, each reported with how many nodes it removed (`Pruned.steps`):
- `usable`: nodes the roots cannot reach, nodes with their own class as a child, nodes needing a
  class that has no acyclic term (`usable_nodes`).
- `dominated` (costs ≥ 0 only): a node with a rival in its class that costs no more and needs a
  subset of its child classes (ties: the lower index stays). Swapping it for the rival keeps any
  program complete and acyclic (the rival's edges are a subset) and never costs more.
- `above-incumbent` (costs ≥ 0 only): a node costing more on its own than a known program in all.
- `cycle-closing`: a node of class C with a child class every term of which contains C — any
  program with it is cyclic. One fixpoint per cyclic component computes, for every class, the
  classes all its terms contain (a class outside C's component cannot reach C); under a time
  budget and a component size (what is not tested keeps its nodes: removing any subset is sound).
  Removing them often breaks the cyclic components up entirely (TENSAT's split/concat loops),
  so the model needs no order variables at all.

Contract: `prune(problem, incumbent, deadline)` returns the needed classes with their remaining
nodes; some optimal program of `problem` uses only those nodes (each step keeps one: an optimal
program is rewritten onto undominated nodes first, and those cannot close cycles).
"""
from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass

from eqdsl import graphs
from eqdsl.extract.egraph import ExtractionProblem
from eqdsl.extract.greedy import tree_greedy, unreachable_roots_error

ClassNodes = dict[int, list[int]]
MAX_COMPONENT = 30_000  # classes: larger cyclic components are not tested (≤ 110 MB of bitsets)


@dataclass(frozen=True)
class Pruned:
    class_nodes: ClassNodes  # needed class → its remaining nodes
    steps: tuple[tuple[str, int], ...]  # (step, nodes removed)
    complete: bool  # False: the cycle-closing test stopped at its time budget or a component's size

    def summary(self) -> str:
        text = ", ".join(f"{name} −{n}" for name, n in self.steps)
        return f"pruned {text}" + ("" if self.complete else " (cycle-closing test stopped at its time budget "
                                                             f"or at a component of over {MAX_COMPONENT} classes)")


def prune(problem: ExtractionProblem, incumbent: float, deadline: float) -> Pruned:
    total = sum(1 for i in range(len(problem.nodes)) if problem.allowed(i))
    class_nodes = usable_nodes(problem)
    steps, blocked = [("usable", total - _count(class_nodes))], set(problem.blocked)

    def remove(name: str, found: set[int]) -> None:
        nonlocal class_nodes
        if not found:
            steps.append((name, 0))
            return
        blocked.update(found)
        before, class_nodes = _count(class_nodes), usable_nodes(_blocking(problem, blocked))
        steps.append((name, before - _count(class_nodes)))

    if not problem.has_negative_costs:
        remove("dominated", _dominated(problem, class_nodes))
        remove("above-incumbent", _above(problem, class_nodes, incumbent))
    closing, complete = _closing(problem, class_nodes, deadline)
    remove("cycle-closing", closing)
    return Pruned(class_nodes, tuple(steps), complete)


def usable_nodes(problem: ExtractionProblem) -> dict[int, list[int]]:
    """Per class reachable from the roots, the nodes that can be part of an acyclic program."""
    candidates = [i for i, n in enumerate(problem.nodes)
                  if problem.allowed(i) and n.eclass not in n.children]
    blocked = problem.blocked | (set(range(len(problem.nodes))) - set(candidates))
    pruned = ExtractionProblem(problem.class_ids, problem.nodes, problem.class_nodes,
                               problem.roots, frozenset(blocked))
    _, best = tree_greedy(pruned)
    if any(math.isinf(best[r]) for r in problem.roots):
        raise unreachable_roots_error(problem, best)
    ok = [i for i in candidates if all(not math.isinf(best[c]) for c in problem.nodes[i].children)]
    by_class: dict[int, list[int]] = {}
    for i in ok:
        by_class.setdefault(problem.nodes[i].eclass, []).append(i)
    needed, stack = set(problem.roots), list(problem.roots)
    while stack:
        for i in by_class.get(stack.pop(), []):
            for c in problem.nodes[i].children:
                if c not in needed:
                    needed.add(c)
                    stack.append(c)
    return {c: by_class[c] for c in needed}


def _count(class_nodes: ClassNodes) -> int:
    return sum(len(nodes) for nodes in class_nodes.values())


def _blocking(problem: ExtractionProblem, blocked: set[int]) -> ExtractionProblem:
    return ExtractionProblem(problem.class_ids, problem.nodes, problem.class_nodes, problem.roots,
                             frozenset(blocked))


def _dominated(problem: ExtractionProblem, class_nodes: ClassNodes) -> set[int]:
    found = set()
    for nodes in class_nodes.values():
        keyed = [(problem.nodes[i].cost, frozenset(problem.nodes[i].children), i) for i in nodes]
        for cost, kids, i in keyed:
            if any(j != i and c <= cost and k <= kids and (c < cost or k < kids or j < i) for c, k, j in keyed):
                found.add(i)
    return found


def _above(problem: ExtractionProblem, class_nodes: ClassNodes, incumbent: float) -> set[int]:
    if math.isinf(incumbent):
        return set()
    return {i for nodes in class_nodes.values() for i in nodes if problem.nodes[i].cost > incumbent}


def _closing(problem: ExtractionProblem, class_nodes: ClassNodes, deadline: float) -> tuple[set[int], bool]:
    edges = {c: sorted({k for i in nodes for k in problem.nodes[i].children}) for c, nodes in class_nodes.items()}
    members: dict[int, list[int]] = {}
    for c, comp in graphs.cyclic_components(edges).items():
        members.setdefault(comp, []).append(c)
    found: set[int] = set()
    for classes in sorted(members.values(), key=len):
        if len(classes) > MAX_COMPONENT:  # its class bitsets would take len² / 8 bytes
            return found, False
        component = _Component(problem, class_nodes, classes)
        unavoidable = component.unavoidable(deadline)
        if unavoidable is None:
            return found, False
        found |= component.closing_nodes(unavoidable)
    return found, True


class _Component:
    """One cyclic component, classes and nodes renumbered 0.. (class sets are int bitsets).
    Children outside the component never lead back into it, so only inside children count."""

    def __init__(self, problem: ExtractionProblem, class_nodes: ClassNodes, classes: list[int]) -> None:
        index = {c: k for k, c in enumerate(classes)}
        self.node_ids = [i for c in classes for i in class_nodes[c]]
        self.node_class = [index[problem.nodes[i].eclass] for i in self.node_ids]
        self.inside = [sorted({index[k] for k in problem.nodes[i].children if k in index}) for i in self.node_ids]
        self.members: list[list[int]] = [[] for _ in classes]
        parents: list[set[int]] = [set() for _ in classes]
        for n, kids in enumerate(self.inside):
            self.members[self.node_class[n]].append(n)
            for k in kids:
                parents[k].add(self.node_class[n])
        self.parents = [sorted(p) for p in parents]

    def unavoidable(self, deadline: float) -> list[int | None] | None:
        """Per class, the bitset of the component's classes that every term of it contains
        (None: no term), or None past the deadline. A dominator-style fixpoint: a class's set is
        itself plus the intersection over its nodes of the union of their children's sets; sets
        only shrink as more terms are found, so a worklist reaches the fixpoint, where each set is
        contained in every term's classes (induction on the term)."""
        sets: list[int | None] = [None] * len(self.members)
        queue, queued = deque(range(len(self.members))), [True] * len(self.members)
        pops = 0
        while queue:
            pops += 1
            if pops % 1024 == 1 and time.monotonic() > deadline:
                return None
            c = queue.popleft()
            queued[c] = False
            new = self._meet(c, sets)
            if new is not None and new != sets[c]:
                sets[c] = new
                for parent in self.parents[c]:
                    if not queued[parent]:
                        queued[parent] = True
                        queue.append(parent)
        return sets

    def _meet(self, c: int, sets: list[int | None]) -> int | None:
        meet = None
        for n in self.members[c]:
            union = 0
            for k in self.inside[n]:
                child = sets[k]
                if child is None:
                    break
                union |= child
            else:
                meet = union if meet is None else meet & union
        return None if meet is None else meet | (1 << c)

    def closing_nodes(self, unavoidable: list[int | None]) -> set[int]:
        """(Problem) ids of the nodes with a child class whose every term contains the node's own class."""
        return {self.node_ids[n] for n, kids in enumerate(self.inside)
                if any((s := unavoidable[k]) is None or s >> self.node_class[n] & 1 for k in kids)}
