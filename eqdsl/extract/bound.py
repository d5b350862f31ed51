"""A valid lower bound on the DAG cost of any program, from tree-cost reasoning (costs ≥ 0).

A program rooted at class c with node n contains n and one sub-program per child class. Their
DAG costs add up only where the sub-programs cannot share a class: children whose reachable
class sets (in the e-graph, over the usable nodes) are disjoint. So
    lb(n) = cost(n) + Σ over groups of children with overlapping reach of max lb(child),
    lb(c) = min over c's nodes of lb(n),
and the roots combine the same way. Without sharing (a matrix chain) this is the tree-cost
optimum, so a greedy solution that meets it is proven optimal at once; with sharing everywhere
it degrades gracefully to a longest-path bound. Reach sets are int bitsets.

The bound is the least solution of these equations, computed in Knuth's generalisation of
Dijkstra's algorithm: lb(n) ≥ cost(n) + max over its children ≥ each child's lb, so classes are
settled cheapest first, a node is priced once its children are settled, and a class keeps the
first price it gets. Valid: for any acyclic program and any class c in it, the program's part
below c costs ≥ lb(c) (by induction children first: disjoint reach means disjoint parts, and c's
node there was priced no lower than c's bound), cycles included — a cycle never settles a class
(iterating from 0 instead crept up by one loop per pass: VGG-19 k2's split/concat loops held it
at 25 % of the optimum; settled exactly, it equals the optimum: BENCHMARKS.md, "VGG-19 k2 proven
optimal by the lower bound").

Contract: `dag_lower_bound(problem, class_nodes, max_classes)` returns a bound ≤ the optimal DAG
cost of the program restricted to `class_nodes`, or 0.0 for negative costs, more than
`max_classes` classes (the reach sets would take too much memory) or a root without an acyclic
program there.
"""
from __future__ import annotations

import heapq

from eqdsl import graphs
from eqdsl.extract.egraph import ExtractionProblem

ClassNodes = dict[int, list[int]]
MAX_CLASSES = 30_000


def dag_lower_bound(problem: ExtractionProblem, class_nodes: ClassNodes, max_classes: int = MAX_CLASSES) -> float:
    if problem.has_negative_costs or len(class_nodes) > max_classes:
        return 0.0
    kids = {c: sorted({k for i in nodes for k in problem.nodes[i].children}) for c, nodes in class_nodes.items()}
    reach = _reach(_components(kids), kids)
    lb = _settle(problem, class_nodes, reach)
    if any(r not in lb for r in problem.roots):
        return 0.0  # no acyclic program (the extractor reports that itself)
    return _combine(problem.roots, lb, reach)


def _settle(problem: ExtractionProblem, class_nodes: ClassNodes, reach: dict[int, int]) -> dict[int, float]:
    """Each class with an acyclic term → its bound, cheapest classes settled first."""
    users: dict[int, list[int]] = {c: [] for c in class_nodes}
    waiting: dict[int, int] = {}
    heap: list[tuple[float, int]] = []
    for c, nodes in class_nodes.items():
        for i in nodes:
            children = set(problem.nodes[i].children)
            waiting[i] = len(children)
            for k in children:
                users[k].append(i)
            if not children:
                heapq.heappush(heap, (problem.nodes[i].cost, c))
    lb: dict[int, float] = {}
    while heap:
        value, c = heapq.heappop(heap)
        if c in lb:
            continue
        lb[c] = value
        for i in users[c]:
            waiting[i] -= 1
            node = problem.nodes[i]
            if waiting[i] == 0 and node.eclass not in lb:
                heapq.heappush(heap, (node.cost + _combine(node.children, lb, reach), node.eclass))
    return lb


def _components(kids: dict[int, list[int]]) -> list[list[int]]:
    """Strongly connected components (singletons too), each after every component it reaches."""
    component = graphs.cyclic_components(kids)
    head = {c: component.get(c, c) for c in kids}
    members: dict[int, list[int]] = {}
    for c in kids:
        members.setdefault(head[c], []).append(c)
    dag = {h: sorted({head[k] for c in group for k in kids[c]} - {h}) for h, group in members.items()}
    return [members[h] for h in graphs.children_first(list(members), lambda h: dag[h])]


def _reach(components: list[list[int]], kids: dict[int, list[int]]) -> dict[int, int]:
    """Class → bitset of the classes reachable from it, itself included (a component's classes
    all reach the same set)."""
    bit = {c: 1 << k for k, c in enumerate(kids)}
    reach: dict[int, int] = {}
    for group in components:
        inside = set(group)
        r = 0
        for c in group:
            r |= bit[c]
            for k in kids[c]:
                if k not in inside:
                    r |= reach[k]
        for c in group:
            reach[c] = r
    return reach


def _combine(children: tuple[int, ...] | list[int], lb: dict[int, float], reach: dict[int, int]) -> float:
    """Σ over groups of children with overlapping reach of the group's largest bound."""
    groups: list[tuple[int, float]] = []  # (union of reach, max lb)
    for c in set(children):
        r, v = reach[c], lb[c]
        merged = [g for g in groups if g[0] & r]
        for g in merged:
            r, v = r | g[0], max(v, g[1])
        groups = [g for g in groups if not g[0] & reach[c]] + [(r, v)]
    return sum(v for _, v in groups)
