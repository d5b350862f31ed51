"""`pulsed`: Q-gym's Algorithm 2 — short explorations separated by extraction and rebuilding.

Each epoch grows the e-graph from the current program for at most `explore_iter` iterations
(node and time limits as in `saturate`; an overshooting iteration is rolled back), extracts every
root together (DAG cost, `epoch_extract`: cpsat or greedy-dag, `epoch_time_limit_s` each), and
starts the next epoch from an e-graph holding only the extracted program. Dropping everything
else keeps the e-graph small enough to explore again, where one long exploration would stall at
the node limit. The best program of all epochs is kept.

Contract: `run` leaves the session holding exactly the best program found (its input included),
so any extractor then returns that program; `ScheduleOutcome.epochs` records each epoch's cost.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

from eqdsl import ir
from eqdsl.engine import EGraphSession
from eqdsl.extract.live import LiveEGraph, live_problem, selection_program
from eqdsl.extract.result import Extraction, Extractor
from eqdsl.schedule.runner import (EpochReport, Limits, LimitedLoop, ProgressFn, ScheduleOutcome,
                                   StopReason)

EXPLORE_RULESET = "pulsed_explore"


@dataclass(frozen=True)
class PulsedScheduler:
    limits: Limits  # iter_limit = explore_iter (per epoch); node and time limits as for saturate
    epochs: int
    extractor: Extractor
    params: dict[str, int]  # the target's values for the cost rules
    rules: tuple[str, ...] | None = None  # None: every single-pattern rule

    def run(self, session: EGraphSession, progress: ProgressFn | None = None) -> ScheduleOutcome:
        t0 = time.perf_counter()
        start_nodes = LimitedLoop(session, self.limits).check_start()
        ruleset = self._ruleset(session)
        current = self._extract(session)  # the input program: the e-graph holds only it
        best, epochs, reports, stop = current, [], [], StopReason.ITERATION_LIMIT
        for epoch in range(1, self.epochs + 1):
            remaining = self.limits.time_limit_s - (time.perf_counter() - t0)
            if remaining <= 0:
                stop = StopReason.TIME_LIMIT
                break
            loop = LimitedLoop(session, replace(self.limits, time_limit_s=remaining),
                               count_classes=False)
            stop = loop.run(lambda _: ruleset, progress)
            reports += loop.reports
            current = self._extract(session)
            epochs.append(EpochReport(epoch, current[1].cost, session.size(), current[1].seconds,
                                      stop.value, current[1].status.value))
            if current[1].cost < best[1].cost:
                best = current
            self._rebuild(session, current[0])
            if stop == StopReason.SATURATED and current[1].cost >= best[1].cost and epoch > 1:
                break  # nothing left to find from here
        self._rebuild(session, best[0])
        return ScheduleOutcome(stop, tuple(reports), session.size(), time.perf_counter() - t0,
                               start_nodes, epochs=tuple(epochs))

    def _ruleset(self, session: EGraphSession) -> str:
        rules = self.rules or tuple(r.name for r in session.lowered.language.single_rules)
        session.define_ruleset(EXPLORE_RULESET, list(rules))
        return EXPLORE_RULESET

    def _extract(self, session: EGraphSession) -> tuple[ir.Program, Extraction]:
        """Extract every root. The next epoch starts from this program even when it is costlier
        than the epoch's start (a factorised but less shared program is often the way to a
        cheaper one; measured in BENCHMARKS.md); the best of all epochs is kept."""
        live: LiveEGraph = live_problem(session.serialize(), session.lowered, self.params)
        extraction = self.extractor.extract(live.problem)
        return selection_program(live, extraction.selection, "pulsed"), extraction

    def _rebuild(self, session: EGraphSession, program: ir.Program) -> None:
        session.reset()
        session.load(program)
        self._ruleset(session)
