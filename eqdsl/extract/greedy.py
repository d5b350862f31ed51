"""`greedy`: egg's bottom-up extractor; each class takes its cheapest node by *tree* cost.

Tree cost counts a shared subterm once per use, so on programs with sharing it can pick a
worse DAG than the optimum (examples/sharing shows it).
"""
from __future__ import annotations

import math
import time
from collections import deque

from eqdsl.diagnostics import EqdslError
from eqdsl.extract.egraph import ExtractionProblem, Selection, dag_cost, restrict
from eqdsl.extract.result import Extraction, ExtractStatus


def parents_of(problem: ExtractionProblem) -> list[list[int]]:
    parents: list[list[int]] = [[] for _ in range(problem.num_classes)]
    for i, node in enumerate(problem.nodes):
        for child in set(node.children):
            parents[child].append(i)
    return parents


def tree_greedy(problem: ExtractionProblem) -> tuple[Selection, list[float]]:
    """Fixpoint of best tree cost per class (worklist over parents); strict improvement only."""
    best = [math.inf] * problem.num_classes
    choice: Selection = {}
    parents = parents_of(problem)
    queue = deque(i for i, n in enumerate(problem.nodes) if not n.children and problem.allowed(i))
    queued = set(queue)
    while queue:
        i = queue.popleft()
        queued.discard(i)
        node = problem.nodes[i]
        cost = node.cost + sum(best[c] for c in node.children)
        if cost < best[node.eclass]:
            best[node.eclass] = cost
            choice[node.eclass] = i
            for p in parents[node.eclass]:
                if p not in queued and problem.allowed(p):
                    queue.append(p)
                    queued.add(p)
    return choice, best


def unreachable_roots_error(problem: ExtractionProblem, best: list[float]) -> EqdslError:
    bad = [problem.class_ids[r] for r in problem.roots if math.isinf(best[r])]
    return EqdslError.one(f"extraction is unsatisfiable: root e-class(es) {', '.join(bad)} have no "
                          "acyclic choice of e-nodes (every choice leads back into a cycle or to a "
                          "blocked node)")


class GreedyExtractor:
    name = "greedy"

    def extract(self, problem: ExtractionProblem) -> Extraction:
        t0 = time.perf_counter()
        choice, best = tree_greedy(problem)
        if any(math.isinf(best[r]) for r in problem.roots):
            raise unreachable_roots_error(problem, best)
        selection = restrict(problem, choice)
        return Extraction(self.name, selection, dag_cost(problem, selection),
                          ExtractStatus.HEURISTIC, time.perf_counter() - t0)
