"""More programs than the cheapest, for a runtime to choose among (`extract: {candidates: k}`).

Contract: `next_programs(problem, make, best, k, input_selection, time_s)` returns up to `k − 1`
extractions other than `best`, distinct from it and from each other (as the nodes they choose),
cheapest first, found within about `time_s` seconds; fewer when the e-graph holds fewer or the
time runs out. Lawler's observation makes them distinct: a program that lacks node n differs from
every program that has it. So each is the extractor (`make(seconds)`) on the e-graph with one node
of `best` blocked (`ExtractionProblem.blocked`): first the nodes `best` has and the input program
(`input_selection`) lacks — its rewrites, the most expensive first — then its other nodes that have
an alternative. Not the exact k cheapest programs (that needs a branch per program found): the
cheapest programs one node away from `best`, which is what a measured choice needs — the cost
model's pick with one of its changes undone or made differently, or, where the pick is the input
program, the input with one change made.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

from eqdsl.diagnostics import EqdslError
from eqdsl.extract.egraph import ExtractionProblem, Selection
from eqdsl.extract.result import Extraction, Extractor

TRIES_PER_CANDIDATE = 3  # nodes blocked per program asked for: some give a program already found


def next_programs(problem: ExtractionProblem, make: Callable[[float], Extractor], best: Extraction, k: int,
                  input_selection: Selection | None, time_s: float) -> list[Extraction]:
    tries = _nodes_to_block(problem, best.selection, input_selection)[:TRIES_PER_CANDIDATE * max(0, k - 1)]
    deadline = time.monotonic() + time_s
    seen = {frozenset(best.selection.values())}
    found: list[Extraction] = []
    for i, node in enumerate(tries):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            program = make(left / (len(tries) - i)).extract(without(problem, node))
        except EqdslError:  # no program of the roots without this node
            continue
        if frozenset(program.selection.values()) not in seen:
            seen.add(frozenset(program.selection.values()))
            found.append(program)
    return sorted(found, key=lambda e: e.cost)[:max(0, k - 1)]


def without(problem: ExtractionProblem, node: int) -> ExtractionProblem:
    """`problem` with `node` blocked; the known programs that use it are no longer known."""
    return replace(problem, blocked=problem.blocked | {node},
                   known=tuple(s for s in problem.known if node not in s.values()))


def _nodes_to_block(problem: ExtractionProblem, chosen: Selection, input_selection: Selection | None) -> list[int]:
    """Nodes of `chosen` whose class has another usable node: the ones the input lacks first, each
    group most expensive first."""
    from_input = set(input_selection.values()) if input_selection else set()
    open_nodes = [n for c, n in chosen.items()
                  if any(m != n and problem.allowed(m) for m in problem.class_nodes[c])]
    return sorted(open_nodes, key=lambda n: (n in from_input, -problem.nodes[n].cost, n))
