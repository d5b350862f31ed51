"""`pulsed`: Q-gym's Algorithm 2 — short explorations separated by extraction and rebuilding.

Each epoch grows the e-graph from the current program for at most `explore_iter` iterations
(node and time limits as in `saturate`; an overshooting iteration is rolled back), extracts every
root together (DAG cost, `epoch_extract`: cpsat or greedy-dag, `epoch_time_limit_s` each), and
starts the next epoch from an e-graph holding only the extracted program. Dropping everything
else keeps the e-graph small enough to explore again, where one long exploration would stall at
the node limit. The best program of all epochs is kept. An epoch's extraction runs under the
schedule's memory limit and the time left (`LimitedLoop.guard`): one that passes either ends the
schedule with that stop reason and the best program so far.

Contract: `run` leaves the session holding exactly the best program found (its input included),
so any extractor then returns that program; `ScheduleOutcome.epochs` records each epoch's cost.
"""
from __future__ import annotations

import difflib
import time
from dataclasses import dataclass, replace
from typing import ClassVar

from eqdsl import ir
from eqdsl import status as live_status
from eqdsl.diagnostics import EqdslError
from eqdsl.egglog.session import EGraphSession
from eqdsl.extract.registry import dag_extractor_names, make_extractor
from eqdsl.extract.result import Extraction, Extractor
from eqdsl.fields import int_at_least, names, one_of, option, positive_number
from eqdsl.schedule.runner import (
    EpochReport,
    LimitedLoop,
    Limits,
    LimitsConfig,
    ProgressFn,
    ScheduleContext,
    ScheduleOutcome,
    StopReason,
)

EXPLORE_RULESET = "pulsed_explore"


def _rule_list(v: object) -> bool:
    return v is None or (isinstance(v, list) and bool(v) and all(isinstance(x, str) for x in v))


@dataclass(frozen=True)
class PulsedConfig(LimitsConfig):
    kind: ClassVar[str] = "pulsed"
    epochs: int = option(4, int_at_least(1), "an int ≥ 1")
    explore_iter: int = option(3, int_at_least(0), "an int ≥ 0")  # iterations per epoch
    epoch_extract: str = option("cpsat", one_of(dag_extractor_names), names(dag_extractor_names))
    epoch_time_limit_s: float = option(10.0, lambda v: positive_number(v), "a number > 0", float)
    # the rules exploration runs; None: every single-pattern rule
    rules: tuple[str, ...] | None = option(None, _rule_list, "a list of rule names",
                                           lambda v: None if v is None else tuple(v))


@dataclass(frozen=True)
class PulsedScheduler:
    limits: Limits  # iter_limit = explore_iter (per epoch); node and time limits as for saturate
    epochs: int
    extractor: Extractor
    rules: tuple[str, ...] | None = None  # None: every single-pattern rule

    def run(self, session: EGraphSession, progress: ProgressFn | None = None) -> ScheduleOutcome:
        t0 = time.perf_counter()
        start_nodes = LimitedLoop(session, self.limits).check_start()
        ruleset = self._ruleset(session)
        current = self._extract(session, session.loaded)  # the input program, or the cheapest of its alternatives
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
            extracted = loop.guard(lambda: self._extract(session))  # under the same memory and time
            if isinstance(extracted, StopReason):  # the epoch's e-graph is dropped: the best program stays
                stop = extracted
                break
            current = extracted
            epochs.append(EpochReport(epoch, current[1].cost, session.size(), current[1].seconds,
                                      stop.value, current[1].status.value))
            if current[1].cost < best[1].cost:
                best = current
            live_status.update(step=epoch, best=best[1].cost, note=f"epoch {epoch} of {self.epochs}")
            self._rebuild(session, current[0])
            if stop == StopReason.SATURATED and current[1].cost >= best[1].cost and epoch > 1:
                break  # nothing left to find from here
        self._rebuild(session, best[0])
        skipped = len(session.lowered.language.multi_rules)
        said = () if self.rules or not skipped else (
            f"pulsed epochs ran the {len(session.lowered.language.single_rules)} single-pattern rules; the "
            f"{skipped} multi-pattern rules are not run by this schedule (saturate's k_multi and mcts run them)",)
        return ScheduleOutcome(stop, tuple(reports), session.size(), time.perf_counter() - t0, start_nodes,
                               epochs=tuple(epochs), details=_details(epochs), lines=_lines(epochs) + said)

    def _ruleset(self, session: EGraphSession) -> str:
        rules = self.rules or tuple(r.name for r in session.lowered.language.single_rules)
        session.define_ruleset(EXPLORE_RULESET, list(rules))
        return EXPLORE_RULESET

    def _extract(self, session: EGraphSession, known: tuple[ir.Program, ...] = ()) -> tuple[ir.Program, Extraction]:
        """Extract every root (at most the cost of the `known` programs). The next epoch starts
        from this program even when it is costlier than the epoch's start (a factorised but less
        shared program is often the way to a cheaper one; measured in BENCHMARKS.md); the best of
        all epochs is kept."""
        return session.extract_now(self.extractor, "pulsed", known)

    def _rebuild(self, session: EGraphSession, program: ir.Program) -> None:
        session.reset()
        session.load(program)
        self._ruleset(session)


def _details(epochs: list[EpochReport]) -> dict:
    """report.json's `schedule.epochs`: each epoch's extracted cost, e-graph size and stop."""
    return {"epochs": [{"epoch": e.index, "cost": e.cost, "nodes": e.nodes,
                        "extract_seconds": round(e.extract_seconds, 6), "stop": e.stop, "extraction": e.status}
                       for e in epochs]}


def _lines(epochs: list[EpochReport]) -> tuple[str, ...]:
    if not epochs:
        return ()
    return ("pulsed epochs (cost of the program extracted after each): " +
            ", ".join(f"{e.index}: {e.cost:.12g} ({e.stop})" for e in epochs),)


def build_pulsed(cfg: PulsedConfig, context: ScheduleContext) -> PulsedScheduler:
    known = {r.name for r in context.language.single_rules}
    multi = {r.name for r in context.language.multi_rules}
    for name in cfg.rules or ():
        if name in multi:
            raise EqdslError.one(f"rule {name!r} is a multi-pattern rule; pulsed epochs run single-pattern rules "
                                 "only (saturate's k_multi and mcts run multi-pattern rules)", path="schedule.rules")
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=3)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise EqdslError.one(f"unknown rule {name!r}; {hint}expected one of the language's {len(known)} "
                                 "single-pattern rules (`eqdsl check --rules RULESET` lists them)",
                                 path="schedule.rules")
    budget = replace(context.extract.budget(), time_s=cfg.epoch_time_limit_s)
    extractor = make_extractor(cfg.epoch_extract, context.extract, "schedule.epoch_extract", budget)
    return PulsedScheduler(cfg.limits(cfg.explore_iter), cfg.epochs, extractor, cfg.rules)
