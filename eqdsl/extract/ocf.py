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
from dataclasses import dataclass

from eqdsl.extract.dag import SET_BUDGET, SetBudgetExceeded
from eqdsl.extract.egraph import CyclicSelection, ExtractionProblem, Selection, dag_cost, restrict
from eqdsl.extract.greedy import parents_of, require_nonnegative, tree_selection
from eqdsl.extract.result import Extraction, ExtractStatus

MAX_SWEEPS = 10_000  # re-pricings per node; costs strictly fall, this only guards float noise


@dataclass(frozen=True)
class Term:
    """The nodes of a class's best term, the classes they belong to, and their total cost."""

    nodes: dict[int, float]  # node → cost
    classes: frozenset[int]
    total: float


def ocf_greedy(problem: ExtractionProblem, budget: int = SET_BUDGET) -> Selection:
    """The fixpoint choice (class → node) for every class that has an acyclic term. Raises
    SetBudgetExceeded when the sets priced would pass `budget` entries in all (a deep e-graph)."""
    best: dict[int, Term] = {}
    choice: Selection = {}
    parents = parents_of(problem)
    queue = deque(i for i, n in enumerate(problem.nodes) if problem.allowed(i))
    queued = set(queue)
    steps, held = MAX_SWEEPS * max(1, len(problem.nodes)), 0
    while queue and steps > 0:
        steps -= 1
        i = queue.popleft()
        queued.discard(i)
        term = _price(problem, i, best)
        if term is None:
            continue
        held += len(term.nodes)
        if held > budget:
            raise SetBudgetExceeded
        c = problem.nodes[i].eclass
        if c not in best or term.total < best[c].total:
            best[c], choice[c] = term, i
            for p in parents[c]:
                if p not in queued and problem.allowed(p):
                    queue.append(p)
                    queued.add(p)
    return choice


def _price(problem: ExtractionProblem, i: int, best: dict[int, Term]) -> Term | None:
    """Node i over its children's best terms: the union of their nodes (each counted once) plus
    itself; None if a child has no term yet or the union holds i's own class (a cycle)."""
    node = problem.nodes[i]
    children = [best.get(c) for c in set(node.children)]
    if any(t is None for t in children):
        return None
    terms = sorted((t for t in children if t is not None), key=lambda t: len(t.nodes), reverse=True)
    if any(node.eclass in t.classes for t in terms):
        return None
    if not terms:
        return Term({i: node.cost}, frozenset({node.eclass}), node.cost)
    nodes, total, classes = dict(terms[0].nodes), terms[0].total, set(terms[0].classes)
    for t in terms[1:]:
        for m, cost in t.nodes.items():
            if m not in nodes:
                nodes[m] = cost
                total += cost
        classes |= t.classes
    nodes[i] = node.cost
    classes.add(node.eclass)
    return Term(nodes, frozenset(classes), total + node.cost)


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
