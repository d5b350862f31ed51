"""`greedy`: egg's bottom-up extractor; each class takes its cheapest node by *tree* cost.

Tree cost counts a shared subterm once per use, so on programs with sharing it can pick a
worse DAG than the optimum (examples/sharing shows it).
"""
from __future__ import annotations

import heapq
import math
import time

from eqdsl.diagnostics import Diagnostic, EqdslError
from eqdsl.extract.egraph import ExtractionProblem, Selection, dag_cost, restrict
from eqdsl.extract.result import Extraction, ExtractStatus


class OutOfTime(EqdslError):
    """An extraction step reached its deadline before it had a program (a greedy extractor has no
    partial one); an exact extractor that has a start catches it and returns the start."""

    def __init__(self, method: str, progress: str) -> None:
        super().__init__()
        self.method = method
        self.diagnostics.append(Diagnostic(
            f"extractor {method} reached extract.time_limit_s ({progress}) before it had any program: "
            "expected a larger extract.time_limit_s", path="extract"))


CHECK_EVERY = 4096  # heap pops between two looks at the clock


def parents_of(problem: ExtractionProblem, deadline: float | None = None, method: str = "greedy") -> list[list[int]]:
    parents: list[list[int]] = [[] for _ in range(problem.num_classes)]
    for i, node in enumerate(problem.nodes):
        if deadline is not None and i % (16 * CHECK_EVERY) == 16 * CHECK_EVERY - 1 and time.monotonic() > deadline:
            raise OutOfTime(method, "reading the e-graph's edges")
        for child in set(node.children):
            parents[child].append(i)
    return parents


def knuth_order(problem: ExtractionProblem, node_cost, deadline: float | None = None,
                method: str = "greedy") -> tuple[Selection, list[float]]:
    """Knuth's generalisation of Dijkstra: classes are settled cheapest first; a node is priced
    once, when the last of its child classes settles. `node_cost(i, best, choice)` prices node i
    from the settled classes' costs and choices, or returns None to reject it. Valid because a node never
    costs less than any of its children (costs are ≥ 0). Raises `OutOfTime` past `deadline`
    (`time.monotonic()`).
    """
    best = [math.inf] * problem.num_classes
    choice: Selection = {}
    waiting = [len(set(n.children)) for n in problem.nodes]
    parents = parents_of(problem, deadline, method)
    heap: list[tuple[float, int]] = []
    for i, n in enumerate(problem.nodes):
        if deadline is not None and i % (16 * CHECK_EVERY) == 16 * CHECK_EVERY - 1 and time.monotonic() > deadline:
            raise OutOfTime(method, "pricing the leaves")
        if not n.children and problem.allowed(i):
            cost = node_cost(i, best, choice)
            if cost is not None:
                heapq.heappush(heap, (cost, i))
    pops = 0
    while heap:
        pops += 1
        if deadline is not None and pops % CHECK_EVERY == 0 and time.monotonic() > deadline:
            raise OutOfTime(method, f"{len(choice)} of {problem.num_classes} e-classes settled")
        cost, i = heapq.heappop(heap)
        c = problem.nodes[i].eclass
        if c in choice:
            continue
        best[c], choice[c] = cost, i
        for p in parents[c]:
            waiting[p] -= 1
            if waiting[p] == 0 and problem.allowed(p) and problem.nodes[p].eclass not in choice:
                price = node_cost(p, best, choice)
                if price is not None:
                    heapq.heappush(heap, (price, p))
    return choice, best


def tree_greedy(problem: ExtractionProblem, deadline: float | None = None,
                method: str = "greedy") -> tuple[Selection, list[float]]:
    """Cheapest tree cost per class."""
    def price(i: int, best: list[float], choice: Selection) -> float:
        node = problem.nodes[i]
        return node.cost + sum(best[c] for c in node.children)

    return knuth_order(problem, price, deadline, method)


def unreachable_roots_error(problem: ExtractionProblem, best: list[float]) -> EqdslError:
    bad = [problem.class_ids[r] for r in problem.roots if math.isinf(best[r])]
    return EqdslError.one(f"extraction is unsatisfiable: root e-class(es) {', '.join(bad)} have no "
                          "acyclic choice of e-nodes (every choice leads back into a cycle or to a "
                          "blocked node)")


def tree_selection(problem: ExtractionProblem, deadline: float | None = None, method: str = "greedy") -> Selection:
    """Tree greedy's choice for the classes the roots need; raises if a root has no finite term."""
    choice, best = tree_greedy(problem, deadline, method)
    if any(math.isinf(best[r]) for r in problem.roots):
        raise unreachable_roots_error(problem, best)
    return restrict(problem, choice)


def require_nonnegative(problem: ExtractionProblem, method: str) -> None:
    """Greedy extraction settles classes cheapest first, which is only right for costs ≥ 0."""
    bad = next((n for n in problem.nodes if n.cost < 0), None)
    if bad is not None:
        raise EqdslError.one(f"extractor {method} needs node costs ≥ 0, got {bad.cost:g} on node "
                             f"{bad.id!r}; expected cpsat for e-graphs with negative costs")


def deadline_after(seconds: float | None) -> float | None:
    return None if seconds is None else time.monotonic() + seconds


class GreedyExtractor:
    name = "greedy"

    def __init__(self, time_limit_s: float | None = None) -> None:
        self.time_limit_s = time_limit_s

    def extract(self, problem: ExtractionProblem) -> Extraction:
        require_nonnegative(problem, self.name)
        t0 = time.perf_counter()
        selection = tree_selection(problem, deadline_after(self.time_limit_s))
        return Extraction(self.name, selection, dag_cost(problem, selection),
                          ExtractStatus.HEURISTIC, time.perf_counter() - t0)
