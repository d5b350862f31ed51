"""`greedy-ocf`: the greedy extractor with Hartmann, He and Yoneki's cost function (PACT 2024, OCF).

egg's greedy extractor (the paper's DCF) prices a node as its cost plus its children's costs, so a
subterm two children share is paid twice and the extractor's estimate is a tree cost. OCF carries
with each class the set of nodes its best term is made of and prices a node as the cost of the
union of its children's sets plus its own: shared subterms count once, and the estimate is the
DAG cost of the term. As in egg, the choices are found by iterating to a fixpoint: a class is
re-priced whenever a child class found a cheaper set, until no class improves. A node whose
children's sets contain its own class would close a cycle and is not taken.

`greedy-dag` computes the same kind of sets in one Dijkstra-like pass (each class settled once,
cheapest first); this fixpoint lets a class improve after its parents were priced, as the paper's
implementation on egg's extractor does. Both are compared in BENCHMARKS.md.
"""
from __future__ import annotations

import time
from collections import deque

from eqdsl.extract.dag import SET_BUDGET, SetBudgetExceeded
from eqdsl.extract.egraph import CyclicSelection, ExtractionProblem, Selection, dag_cost, restrict
from eqdsl.extract.greedy import parents_of, require_nonnegative, tree_selection
from eqdsl.extract.result import Extraction, ExtractStatus

MAX_SWEEPS = 10_000  # re-pricings per node; costs strictly fall, this only guards float noise


def ocf_greedy(problem: ExtractionProblem, budget: int = SET_BUDGET) -> Selection:
    """The fixpoint choice (class → node) for every class that has an acyclic term. Raises
    SetBudgetExceeded when the sets priced would pass `budget` entries in all (a deep e-graph)."""
    sets: dict[int, frozenset[int]] = {}  # class → the nodes of its best term
    cost: dict[int, float] = {}
    choice: Selection = {}
    parents = parents_of(problem)
    queue = deque(i for i, n in enumerate(problem.nodes) if problem.allowed(i))
    queued = set(queue)
    steps, held = MAX_SWEEPS * max(1, len(problem.nodes)), 0
    while queue and steps > 0:
        steps -= 1
        i = queue.popleft()
        queued.discard(i)
        priced = _price(problem, i, sets)
        if priced is None:
            continue
        members, total = priced
        held += len(members)
        if held > budget:
            raise SetBudgetExceeded
        c = problem.nodes[i].eclass
        if total < cost.get(c, float("inf")):
            sets[c], cost[c], choice[c] = members, total, i
            for p in parents[c]:
                if p not in queued and problem.allowed(p):
                    queue.append(p)
                    queued.add(p)
    return choice


def _price(problem: ExtractionProblem, i: int, sets: dict[int, frozenset[int]]) -> tuple[frozenset[int], float] | None:
    node = problem.nodes[i]
    members = {i}
    for child in set(node.children):
        child_set = sets.get(child)
        if child_set is None:
            return None
        members |= child_set
    if any(problem.nodes[m].eclass == node.eclass for m in members if m != i):
        return None  # the term would contain its own class: a cycle
    return frozenset(members), sum(problem.nodes[m].cost for m in members)


class GreedyOcfExtractor:
    name = "greedy-ocf"

    def extract(self, problem: ExtractionProblem) -> Extraction:
        require_nonnegative(problem, self.name)
        t0 = time.perf_counter()
        fallback = tree_selection(problem)  # raises when a root has no acyclic term at all
        note = ""
        try:
            choice = ocf_greedy(problem)
            selection = restrict(problem, choice) if all(r in choice for r in problem.roots) else fallback
        except CyclicSelection:  # classes priced at different times can disagree on the DAG
            selection, note = fallback, "the sets' choices formed a cycle: tree greedy's choice"
        except SetBudgetExceeded:
            selection, note = fallback, f"node sets passed {SET_BUDGET} entries (a deep e-graph): tree greedy's choice"
        if dag_cost(problem, fallback) < dag_cost(problem, selection):
            selection, note = fallback, "tree greedy was cheaper"
        return Extraction(self.name, selection, dag_cost(problem, selection), ExtractStatus.HEURISTIC,
                          time.perf_counter() - t0, note=note)
