"""Warm starts: a fast, valid program that an exact extractor starts from and falls back to.

Contract: `STARTS` maps a name to a `Start`, `problem -> Extraction`, whose selection is complete
and acyclic for any costs' signs (on negative costs it is just a valid start, with no claim). A
start that takes a `deadline` keyword (`time.monotonic()`, None: none) raises `greedy.OutOfTime`
past it if it has no program yet; `run_start` passes it to those that do. An
extractor kind registered with a `start` (`eqdsl.extract.registry.ExtractorKind.start`) adds it
here, so `extract.warm_start` accepts it.
"""
from __future__ import annotations

import inspect
import time
from typing import Callable

from eqdsl.extract.dag import best_greedy
from eqdsl.extract.egraph import ExtractionProblem, dag_cost, restrict
from eqdsl.extract.greedy import tree_selection
from eqdsl.extract.result import Extraction, ExtractStatus

Start = Callable[..., Extraction]  # (problem) or (problem, deadline=...) → a start


def run_start(start: Start, problem: ExtractionProblem, deadline: float | None) -> Extraction:
    """`start(problem)`, with `deadline=` where it takes one (a plugin's start may not)."""
    if "deadline" in inspect.signature(start).parameters:
        return start(problem, deadline=deadline)
    return start(problem)


def tree_start(problem: ExtractionProblem, deadline: float | None = None) -> Extraction:
    """Tree greedy's choice, priced as a DAG."""
    t0 = time.perf_counter()
    selection = tree_selection(problem, deadline)
    return Extraction("greedy", selection, dag_cost(problem, selection), ExtractStatus.HEURISTIC,
                      time.perf_counter() - t0)


def cheapest_known(problem: ExtractionProblem, than: Extraction) -> Extraction:
    """`than`, or the cheaper of the problem's known programs (`ExtractionProblem.known`) if one
    costs less."""
    best = than
    for selection in problem.known:
        cost = dag_cost(problem, selection)
        if cost < best.cost:
            best = Extraction(than.method, restrict(problem, selection), cost, ExtractStatus.HEURISTIC, than.seconds,
                              note=f"a loaded program (the {than.method} result cost {than.cost:.12g})")
    return best


STARTS: dict[str, Start] = {"greedy": tree_start, "greedy-dag": best_greedy}


def register_start(name: str, start: Start) -> None:
    STARTS[name] = start


def start_names() -> list[str]:
    return list(STARTS)
