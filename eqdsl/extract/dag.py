"""`greedy-dag`: sharing-aware greedy. A class's cost is the sum over the *set* of classes its
best term uses (each counted once), as in extraction-gym's faster-greedy-dag and Hartmann et
al.'s cost function; a node whose children's sets contain its own class would close a cycle and
is skipped.

The sets of a deep e-graph grow with its depth (a chain of n classes holds n²/2 entries), so their
total size is bounded (`SET_BUDGET` entries); past it the tree greedy choice is returned, with a
note saying so.
"""
from __future__ import annotations

import time

from eqdsl.extract.egraph import CyclicSelection, ExtractionProblem, Selection, dag_cost, restrict
from eqdsl.extract.greedy import OutOfTime, deadline_after, knuth_order, require_nonnegative, tree_selection
from eqdsl.extract.result import Extraction, ExtractStatus

SET_BUDGET = 20_000_000


class SetBudgetExceeded(Exception):
    pass


def dag_greedy(problem: ExtractionProblem, budget: int = SET_BUDGET, deadline: float | None = None) -> Selection:
    """Raises SetBudgetExceeded when the term sets would pass `budget` entries in all, `OutOfTime`
    past `deadline`."""
    node_sets: dict[int, dict[int, float]] = {}  # node → {class: cost} of the term it roots
    held = 0

    def price(i: int, best: list[float], choice: Selection) -> float | None:
        nonlocal held
        node = problem.nodes[i]
        merged = _merge(node.eclass, node.cost, [node_sets[choice[c]] for c in set(node.children)])
        if merged is None:
            return None
        held += len(merged)
        if held > budget:
            raise SetBudgetExceeded
        node_sets[i] = merged
        return sum(merged.values())

    choice, _ = knuth_order(problem, price, deadline, "greedy-dag")
    return choice


def _merge(own: int, own_cost: float, child_sets: list[dict[int, float]]) -> dict[int, float] | None:
    if not child_sets:
        return {own: own_cost}
    largest = max(child_sets, key=len)
    if own in largest:
        return None
    merged = dict(largest)
    for s in child_sets:
        if s is largest:
            continue
        if own in s:
            return None
        merged.update(s)
    merged[own] = own_cost
    return merged


class GreedyDagExtractor:
    name = "greedy-dag"

    def __init__(self, time_limit_s: float | None = None) -> None:
        self.time_limit_s = time_limit_s

    def extract(self, problem: ExtractionProblem) -> Extraction:
        require_nonnegative(problem, self.name)
        return best_greedy(problem, deadline_after(self.time_limit_s), self.name)


def best_greedy(problem: ExtractionProblem, deadline: float | None = None,
                name: str = GreedyDagExtractor.name) -> Extraction:
    """The sharing-aware choice, or tree greedy's where that is cheaper as a DAG (never worse).
    Any costs (the cpsat warm start uses it on negative ones too: then it is just a valid start).
    Past `deadline`: tree greedy's choice, labelled, if that was done (else `OutOfTime`)."""
    t0 = time.perf_counter()
    selection = tree_selection(problem, deadline, name)
    cost, note = dag_cost(problem, selection), "tree greedy was cheaper"
    try:
        choice = dag_greedy(problem, deadline=deadline)
        candidate = restrict(problem, choice) if all(r in choice for r in problem.roots) else None
    except CyclicSelection:
        candidate = None  # per-class choices made at different times can disagree
    except SetBudgetExceeded:
        candidate, note = None, f"term sets passed {SET_BUDGET} entries (a deep e-graph): tree greedy's choice"
    except OutOfTime:
        candidate, note = None, "the time limit ended the sharing-aware pass: tree greedy's choice"
    if candidate is not None and dag_cost(problem, candidate) <= cost:
        selection, cost, note = candidate, dag_cost(problem, candidate), ""
    return Extraction(name, selection, cost, ExtractStatus.HEURISTIC, time.perf_counter() - t0, note=note)
