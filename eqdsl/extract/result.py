"""Extraction outcomes, the `Extractor` interface and the budget an extractor is made with.

Contract: an extractor is made with an `ExtractBudget` (its caller's: the run's `extract:` section,
or a schedule's epoch or rollout) and its own options; `Extractor.extract(problem)` returns an
`Extraction` whose selection is complete and
acyclic for every root (checked with `egraph.reachable` before it is returned), or raises
`EqdslError` when no such selection exists. `cost` is the DAG cost (shared nodes counted once).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from eqdsl.extract.egraph import ExtractionProblem, Selection


class ExtractStatus(Enum):
    OPTIMAL = "optimal"  # proven minimal DAG cost
    FEASIBLE = "feasible"  # a valid program; `bound` and `gap` say how far from optimal at most
    HEURISTIC = "heuristic"  # a greedy answer: valid, no optimality claim


@dataclass(frozen=True)
class Extraction:
    method: str
    selection: Selection
    cost: float
    status: ExtractStatus
    seconds: float
    bound: float | None = None
    note: str = ""
    trace: tuple[tuple[float, float, float], ...] = ()  # (seconds, best cost, bound) as an exact search went

    @property
    def gap(self) -> float | None:
        if self.bound is None:
            return None
        if self.cost == self.bound:
            return 0.0
        scale = max(abs(self.cost), abs(self.bound))  # costs may be negative (cpsat)
        return max(0.0, (self.cost - self.bound) / scale) if scale > 0 else 0.0


@dataclass(frozen=True)
class ExtractBudget:
    """What a caller lets one extraction use. `time_s`: seconds (an exact extractor returns a
    labelled feasible result when they run out); `threads`: at most this many; `deterministic`:
    the same problem gives the same result every time (a seeded search replaying its rewards)."""

    time_s: float
    threads: int = 1
    deterministic: bool = False


class Extractor(Protocol):
    name: str

    def extract(self, problem: ExtractionProblem) -> Extraction:
        ...
