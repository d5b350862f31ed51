"""A valid lower bound on the DAG cost of any program, from tree-cost reasoning (costs ≥ 0).

A program rooted at class c with node n contains n and one sub-program per child class. Their
DAG costs add up only where the sub-programs cannot share a class: children whose reachable
class sets (in the e-graph, over the usable nodes) are disjoint. So
    lb(n) = cost(n) + Σ over groups of children with overlapping reach of max lb(child),
    lb(c) = min over c's nodes of lb(n),
and the roots combine the same way. Without sharing (a matrix chain) this is the tree-cost
optimum, so a greedy solution that meets it is proven optimal at once; with sharing everywhere
it degrades gracefully to a longest-path bound. Iterated from 0 upwards, every iterate is valid
(cycles included); reach sets are int bitsets.

Contract: `dag_lower_bound(problem, class_nodes, max_classes)` returns a bound ≤ the optimal DAG
cost of the program restricted to `class_nodes`, or 0.0 for negative costs or more than
`max_classes` classes (the reach sets would take too much memory).
"""
from __future__ import annotations

from eqdsl import graphs
from eqdsl.extract.egraph import ExtractionProblem

ClassNodes = dict[int, list[int]]
MAX_CLASSES = 30_000
MAX_PASSES = 8


def dag_lower_bound(problem: ExtractionProblem, class_nodes: ClassNodes, max_classes: int = MAX_CLASSES) -> float:
    if problem.has_negative_costs or len(class_nodes) > max_classes:
        return 0.0
    kids = {c: sorted({k for i in nodes for k in problem.nodes[i].children}) for c, nodes in class_nodes.items()}
    components = _components(kids)
    order = [c for group in components for c in group]
    reach = _reach(components, kids)
    lb = dict.fromkeys(class_nodes, 0.0)
    for _ in range(MAX_PASSES if any(len(g) > 1 for g in components) else 1):
        changed = False
        for c in order:
            best = min(problem.nodes[i].cost + _combine(problem.nodes[i].children, lb, reach) for i in class_nodes[c])
            if best > lb[c]:
                lb[c], changed = best, True
        if not changed:
            break
    return _combine(problem.roots, lb, reach)


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
