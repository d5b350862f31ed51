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

Besides removing nodes, the same fixpoint finds **cycle conflicts**: pairs of nodes n (class C) and
m (class D) where every term of n contains D and every term of m contains C — a program with both
is cyclic, so the model may add `x_n + x_m ≤ 1`. TENSAT's split/concat loops are the typical case
(`C = split0(split(concat(C', D)))` beside `concat(C, …)` in D); the model without order variables
then rarely chooses a cycle at all (BENCHMARKS.md, extraction at scale).

`unavoidable_classes` runs the same fixpoint over the whole class graph: the classes every program
holds (`eqdsl.extract.decompose` splits a problem there; `eqdsl.extract.hitting` aims its cores at
them). `apply_filter` blocks TENSAT's DFS cycle filter list (`cpsat`'s `filter-list`).

Contract: `prune(problem, incumbent, deadline)` returns the needed classes with their remaining
nodes, and cycle conflicts among them; some optimal program of `problem` uses only those nodes
and no conflicting pair (each step keeps one: an optimal program is rewritten onto undominated
nodes first, and those cannot close cycles; an acyclic program never holds a conflicting pair).
"""
from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from eqdsl import graphs
from eqdsl.diagnostics import EqdslError
from eqdsl.extract.egraph import ExtractionProblem
from eqdsl.extract.greedy import tree_greedy, unreachable_roots_error

ClassNodes = dict[int, list[int]]
MAX_COMPONENT = 30_000  # classes: larger cyclic components are not tested (≤ 110 MB of bitsets)


@dataclass(frozen=True)
class Pruned:
    class_nodes: ClassNodes  # needed class → its remaining nodes
    steps: tuple[tuple[str, int], ...]  # (step, nodes removed)
    complete: bool  # False: the cycle-closing test stopped at its time budget or a component's size
    conflicts: tuple[tuple[int, int], ...] = ()  # node pairs no acyclic program holds together
    acyclic: bool = False  # known: no cycle among `class_nodes` (every program of them is acyclic)

    def summary(self) -> str:
        text = ", ".join(f"{name} −{n}" for name, n in self.steps)
        stopped = "" if self.complete else (" (cycle-closing test stopped at its time budget or at a component "
                                            f"of over {MAX_COMPONENT} classes)")
        return f"pruned {text}; {len(self.conflicts)} cycle conflict(s)" + stopped


def prune(problem: ExtractionProblem, incumbent: float, deadline: float, hard_deadline: float | None = None) -> Pruned:
    total = sum(1 for i in range(len(problem.nodes)) if problem.allowed(i))
    class_nodes = usable_nodes(problem, hard_deadline)
    steps, blocked = [("usable", total - _count(class_nodes))], set(problem.blocked)

    def remove(name: str, found: set[int], keeps_classes_usable: bool = False) -> None:
        nonlocal class_nodes
        if not found:
            steps.append((name, 0))
            return
        blocked.update(found)
        before = _count(class_nodes)
        if keeps_classes_usable:
            class_nodes = _needed(problem, {c: [i for i in kept if i not in found] for c, kept in class_nodes.items()})
        else:
            class_nodes = usable_nodes(_blocking(problem, blocked))
        steps.append((name, before - _count(class_nodes)))

    if not problem.has_negative_costs:
        # a dominated node's class keeps its dominating node, usable on fewer children
        remove("dominated", _dominated(problem, class_nodes, deadline), keeps_classes_usable=True)
        remove("above-incumbent", _above(problem, class_nodes, incumbent))
    closing, conflicts, complete, acyclic = _closing(problem, class_nodes, deadline)
    remove("cycle-closing", closing)
    kept = {i for nodes in class_nodes.values() for i in nodes}
    conflicts = {pair for pair in conflicts if pair[0] in kept and pair[1] in kept}
    return Pruned(class_nodes, tuple(steps), complete, tuple(sorted(conflicts)), acyclic)


def usable_nodes(problem: ExtractionProblem, deadline: float | None = None) -> dict[int, list[int]]:
    """Per class reachable from the roots, the nodes that can be part of an acyclic program
    (`greedy.OutOfTime` past `deadline`)."""
    candidates = [i for i, n in enumerate(problem.nodes)
                  if problem.allowed(i) and n.eclass not in n.children]
    blocked = problem.blocked | (set(range(len(problem.nodes))) - set(candidates))
    pruned = ExtractionProblem(problem.class_ids, problem.nodes, problem.class_nodes,
                               problem.roots, frozenset(blocked))
    _, best = tree_greedy(pruned, deadline)
    if any(math.isinf(best[r]) for r in problem.roots):
        raise unreachable_roots_error(problem, best)
    ok = [i for i in candidates if all(not math.isinf(best[c]) for c in problem.nodes[i].children)]
    by_class: dict[int, list[int]] = {}
    for i in ok:
        by_class.setdefault(problem.nodes[i].eclass, []).append(i)
    return _needed(problem, by_class)


def unavoidable_classes(problem: ExtractionProblem, class_nodes: ClassNodes, deadline: float) -> set[int] | None:
    """The classes every program of `class_nodes` holds: the roots and every class all of their
    terms contain (the cycle-closing fixpoint over the whole class graph); None past the
    deadline or above `MAX_COMPONENT` classes."""
    classes = list(class_nodes)
    if len(classes) > MAX_COMPONENT:
        return None
    sets = _Component(problem, class_nodes, classes).unavoidable(deadline)
    if sets is None:
        return None
    held = 0
    for r in problem.roots:
        held |= sets[classes.index(r)] or 0
    return {c for k, c in enumerate(classes) if held >> k & 1}


def _needed(problem: ExtractionProblem, by_class: ClassNodes) -> ClassNodes:
    """The classes the roots reach through the nodes of `by_class`, with those nodes."""
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


def _dominated(problem: ExtractionProblem, class_nodes: ClassNodes, deadline: float) -> set[int]:
    """Nodes another node of their class dominates: no dearer, over a subset of their children
    (ties: the lower index stays). Per node, only the cheapest node of each subset of its children
    can dominate it, so the subsets are looked up (linear in the class, not quadratic: a class of
    acsum's million-node e-graph holds thousands of nodes). Past `deadline`, what was found so far
    (each is dominated: removing fewer is sound)."""
    found: set[int] = set()
    for checked, nodes in enumerate(class_nodes.values()):
        if checked % 1024 == 0 and time.monotonic() > deadline:
            break
        if len(nodes) > 1:
            found |= _dominated_in_class(problem, nodes)
    return found


SUBSETS_UP_TO = 10  # children; a node with more is compared with each node of its class instead


def _dominated_in_class(problem: ExtractionProblem, nodes: list[int]) -> set[int]:
    keyed = [(problem.nodes[i].cost, frozenset(problem.nodes[i].children), i) for i in nodes]
    cheapest: dict[frozenset[int], tuple[float, int]] = {}
    for cost, kids, i in keyed:
        if kids not in cheapest or (cost, i) < cheapest[kids]:
            cheapest[kids] = (cost, i)
    found = set()
    for cost, kids, i in keyed:
        if len(kids) <= SUBSETS_UP_TO:
            witnesses = (cheapest[k] + (k,) for k in _subsets(kids) if k in cheapest)
        else:
            witnesses = ((c, j, k) for c, k, j in keyed)
        if any(j != i and c <= cost and k <= kids and (c < cost or k < kids or j < i) for c, j, k in witnesses):
            found.add(i)
    return found


def _subsets(items: frozenset[int]) -> list[frozenset[int]]:
    subsets: list[frozenset[int]] = [frozenset()]
    for item in items:
        subsets += [s | {item} for s in subsets]
    return subsets


def _above(problem: ExtractionProblem, class_nodes: ClassNodes, incumbent: float) -> set[int]:
    if math.isinf(incumbent):
        return set()
    return {i for nodes in class_nodes.values() for i in nodes if problem.nodes[i].cost > incumbent}


# closing nodes, cycle conflicts, complete, no cyclic component at all
Found = tuple[set[int], set[tuple[int, int]], bool, bool]


def _closing(problem: ExtractionProblem, class_nodes: ClassNodes, deadline: float) -> Found:
    edges = {c: sorted({k for i in nodes for k in problem.nodes[i].children}) for c, nodes in class_nodes.items()}
    members: dict[int, list[int]] = {}
    for c, comp in graphs.cyclic_components(edges).items():
        members.setdefault(comp, []).append(c)
    found: set[int] = set()
    conflicts: set[tuple[int, int]] = set()
    for classes in sorted(members.values(), key=len):
        if len(classes) > MAX_COMPONENT:  # its class bitsets would take len² / 8 bytes
            return found, conflicts, False, False
        component = _Component(problem, class_nodes, classes)
        unavoidable = component.unavoidable(deadline)
        if unavoidable is None:
            return found, conflicts, False, False
        found |= component.closing_nodes(unavoidable)
        conflicts |= component.conflicts(unavoidable)
    return found, conflicts, True, not members


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

    def conflicts(self, unavoidable: list[int | None]) -> set[tuple[int, int]]:
        """(Problem) id pairs of nodes n, m where every term of n contains m's class and every
        term of m contains n's class. The classes every term of a node contains: the union of its
        children's unavoidable sets (a subset of the truth if the sets are: sound either way).
        Vectorised: (node, class it needs) entries are keyed by their class pair, and a pair of
        classes needed both ways pairs its nodes (NasNet-A: 2.4 million entries)."""
        node, needed = self._needs(unavoidable)
        own = np.asarray(self.node_class, dtype=np.int64)[node]
        size = len(self.members)
        low, high = own < needed, own > needed  # n (class c) needs d, with c < d or c > d
        key_low, key_high = own[low] * size + needed[low], needed[high] * size + own[high]
        if not len(key_low) or not len(key_high):
            return set()
        low_keys = _distinct(key_low)
        common = low_keys[_member(low_keys, _distinct(key_high))]
        pairs: set[tuple[int, int]] = set()
        if not len(common):
            return pairs
        sides = [self._by_key(key, node[mask], common) for key, mask in ((key_low, low), (key_high, high))]
        for k in common.tolist():
            for n in sides[0][k]:
                for m in sides[1][k]:
                    pairs.add((self.node_ids[n], self.node_ids[m]))
        return pairs

    @staticmethod
    def _by_key(keys: np.ndarray, nodes: np.ndarray, common: np.ndarray) -> dict[int, list[int]]:
        keep = _member(keys, common)
        grouped: dict[int, list[int]] = {}
        for k, n in zip(keys[keep].tolist(), nodes[keep].tolist()):
            grouped.setdefault(k, []).append(n)
        return grouped

    def _needs(self, unavoidable: list[int | None]) -> tuple[np.ndarray, np.ndarray]:
        """(node, class) entries: the classes every term of each node contains, cycle-closing
        nodes (removed anyway) and unusable ones (a child without a term) left out."""
        width = (len(self.members) + 7) // 8
        unions = []
        for n, kids in enumerate(self.inside):
            union = 0
            for k in kids:
                child = unavoidable[k]
                if child is None:
                    union = 0
                    break
                union |= child
            unions.append(0 if union >> self.node_class[n] & 1 else union)
        packed = np.frombuffer(b"".join(u.to_bytes(width, "little") for u in unions), dtype=np.uint8)
        row, byte = np.nonzero(packed.reshape(len(unions), width))  # sparse: few bytes are set
        bits = np.unpackbits(packed.reshape(len(unions), width)[row, byte][:, None], axis=1, bitorder="little")
        entry, bit = np.nonzero(bits)
        return row[entry].astype(np.int64), (byte[entry] * 8 + bit).astype(np.int64)


def _distinct(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values (np.unique hashes here: 16× slower on millions of int64 keys)."""
    ordered = np.sort(keys)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if len(ordered) else ordered


def _member(keys: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Which `keys` are in the sorted, non-empty `table`."""
    return table[np.searchsorted(table, keys).clip(max=len(table) - 1)] == keys


# ---- `cpsat`'s `filter-list` acyclicity: TENSAT's cycle filter, nodes blocked before the model ----
def dfs_filter_list(problem: ExtractionProblem, class_nodes: dict[int, list[int]]) -> set[int]:
    """TENSAT-style cycle filter: depth-first from the roots (each class's nodes cheapest tree
    cost first); when an edge closes a cycle, the last node on the cycle that is not part of tree
    greedy's program is filtered, so that program always survives."""
    choice, best = tree_greedy(problem)
    keep = set(choice.values())

    def tree_cost(node: int) -> float:
        n = problem.nodes[node]
        return n.cost + sum(best[c] for c in n.children)

    def edges(c: int):
        return [(node, child) for node in sorted(class_nodes.get(c, []), key=tree_cost)
                for child in sorted(set(problem.nodes[node].children))]

    return graphs.filter_cycles(problem.roots, edges, lambda cycle: next(n for n in reversed(cycle) if n not in keep))


def apply_filter(problem: ExtractionProblem, class_nodes: dict[int, list[int]]):
    """Block the DFS filter list; keep the unfiltered nodes if the filter would leave a root
    without any program (the lazy cuts then keep the result acyclic)."""
    blocked = dfs_filter_list(problem, class_nodes)
    pruned = replace(problem, blocked=problem.blocked | frozenset(blocked))
    try:
        return usable_nodes(pruned), len(blocked)
    except EqdslError:
        return class_nodes, 0
