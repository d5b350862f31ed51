"""`saturate`: apply every rule each iteration until saturation or a limit (TENSAT's schedule).

Multi-pattern rules run only in the first `k_multi` iterations (TENSAT: they keep firing on
their own output and blow the e-graph up).

Cycle filtering (`cycle_filter`: none | efficient | vanilla) runs after every iteration that changed
the e-graph; see `eqdsl.schedule.cycles` for the two algorithms.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from eqdsl.egglog.session import EGraphSession
from eqdsl.fields import int_at_least, is_bool, one_of, option
from eqdsl.schedule.cycles import CycleFilter
from eqdsl.schedule.runner import LimitedLoop, Limits, LimitsConfig, ProgressFn, ScheduleContext, ScheduleOutcome

CYCLE_FILTERS = ("none", "efficient", "vanilla")


@dataclass(frozen=True)
class SaturateConfig(LimitsConfig):
    kind: ClassVar[str] = "saturate"
    iter_limit: int = option(15, int_at_least(0), "an int ≥ 0")
    k_multi: int = option(1, int_at_least(0), "an int ≥ 0")
    # count e-classes every iteration (costs a freeze of the e-graph)
    class_counts: bool = option(True, is_bool, "true or false")
    cycle_filter: str = option("none", one_of(CYCLE_FILTERS), f"one of {', '.join(CYCLE_FILTERS)}")


@dataclass(frozen=True)
class SaturateScheduler:
    limits: Limits
    k_multi: int = 1
    count_classes: bool = True
    cycle_filter: str = "none"

    def ruleset_for(self, iteration: int) -> str:
        return "all" if iteration <= self.k_multi else "single"

    def run(self, session: EGraphSession, progress: ProgressFn | None = None) -> ScheduleOutcome:
        loop = LimitedLoop(session, self.limits, self.count_classes)
        start_nodes = loop.check_start()
        filt = None if self.cycle_filter == "none" else CycleFilter(self.cycle_filter == "vanilla")
        if filt is not None:
            filt.apply(session)  # the input program may already hold cycles (rare)
        stop = loop.run(self.ruleset_for, progress, filt)
        kept = [r for r in loop.reports if not r.rolled_back]
        nodes = kept[-1].nodes if kept else start_nodes
        return ScheduleOutcome(stop, tuple(loop.reports), nodes, loop.elapsed(), start_nodes)


def build_saturate(cfg: SaturateConfig, context: ScheduleContext) -> SaturateScheduler:
    return SaturateScheduler(cfg.limits(cfg.iter_limit), cfg.k_multi, cfg.class_counts, cfg.cycle_filter)
