"""Typed limits and outcomes shared by every schedule, and the `Scheduler` interface.

Contract: a `Scheduler` grows the e-graph of an `EGraphSession` and returns a `ScheduleOutcome`.
The node limit is hard: the e-graph left in the session never has more than `node_limit`
e-nodes (an iteration that overshoots is rolled back; see `LimitedLoop`). Memory and time are hard
limits too inside an `eqdsl` command's worker process (`eqdsl.worker.guarded`): an iteration that
passes `memory_bytes` or the time limit is stopped and the e-graph is the one before it. In a
library caller's own process an iteration cannot be stopped, so there the time limit is checked
between iterations only and the memory limit not at all.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, ClassVar, Protocol, TypeVar

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.egglog.session import EGraphSession, StepResult
from eqdsl.extract.registry import ExtractConfig
from eqdsl.fields import int_at_least, option, positive_number
from eqdsl.schedule.cycles import CycleFilter
from eqdsl.worker import Budget, StopCause, Stopped, default_memory_bytes, guarded

T = TypeVar("T")


class StopReason(Enum):
    SATURATED = "saturated"
    NO_IMPROVEMENT = "no rule improves the cost"  # MCTS: every child searched, none cheaper
    ITERATION_LIMIT = "iteration limit"
    NODE_LIMIT = "node limit"
    TIME_LIMIT = "time limit"
    MEMORY_LIMIT = "memory limit"
    KILLED = "killed"  # the iteration's process died from outside (e.g. the kernel's OOM killer)


@dataclass(frozen=True)
class Limits:
    iter_limit: int
    node_limit: int
    time_limit_s: float
    memory_bytes: int | None = None  # the e-graph process's memory; None: unbounded


@dataclass(frozen=True)
class LimitsConfig:
    """The `schedule:` keys every kind has; a kind's config subclasses it (`kind` a ClassVar;
    `elsewhere`: keys users may expect here, with where that setting lives instead)."""

    elsewhere: ClassVar[dict[str, str]] = {}

    node_limit: int = option(50_000, int_at_least(1), "an int ≥ 1")
    time_limit_s: float = option(60.0, lambda v: positive_number(v), "a number > 0", float)
    # None: half the machine's memory (eqdsl.worker)
    memory_limit_mb: int | None = option(None, lambda v: v is None or int_at_least(64)(v),
                                         "an int ≥ 64 (MiB) or null")

    def memory_bytes(self) -> int:
        return default_memory_bytes() if self.memory_limit_mb is None else self.memory_limit_mb << 20

    def limits(self, iter_limit: int) -> Limits:
        return Limits(iter_limit, self.node_limit, self.time_limit_s, self.memory_bytes())


@dataclass(frozen=True)
class ScheduleContext:
    """What a schedule kind's builder may read besides its own config section."""

    language: ir.Language
    params: dict[str, int]  # the target's values for the cost rules
    extract: ExtractConfig  # the run's `extract:` section (extractors a schedule makes start from it)


@dataclass(frozen=True)
class IterationReport:
    index: int  # 1-based
    ruleset: str
    nodes: int
    classes: int | None
    matches: dict[str, int]
    seconds: float
    rollback: StopReason | None = None  # the limit the iteration overshot (it was undone)
    filtered: int = 0  # nodes subsumed by cycle filtering in this iteration
    filter_seconds: float = 0.0

    @property
    def rolled_back(self) -> bool:
        return self.rollback is not None


@dataclass(frozen=True)
class EpochReport:
    """One epoch of a pulsed schedule: the cost of the program extracted at its end."""

    index: int  # 1-based
    cost: float
    nodes: int  # e-graph size when extracted
    extract_seconds: float
    stop: str  # why exploration ended
    status: str  # the extraction's status (optimal / feasible / heuristic)


@dataclass(frozen=True)
class SearchStep:
    """One step an MCTS schedule applied to the real e-graph, after a tree search."""

    index: int  # 1-based
    rule: str
    visits: int  # the chosen child's visits in the search
    mean_reward: float  # its mean reward (cost decrease / the search root's cost)
    nodes: int  # e-graph size after the step
    cost: float  # the main extractor's cost after the step
    iterations: int  # search iterations run before choosing
    seconds: float


@dataclass(frozen=True)
class ScheduleOutcome:
    stop: StopReason
    iterations: tuple[IterationReport, ...]
    nodes: int
    seconds: float
    start_nodes: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    epochs: tuple[EpochReport, ...] = ()  # programs extracted while scheduling (pulsed)
    steps: tuple[SearchStep, ...] = ()  # rules applied after a search (mcts)
    details: dict[str, Any] = field(default_factory=dict)  # the kind's own report.json sections
    lines: tuple[str, ...] = ()  # the kind's own summary lines


ProgressFn = Callable[[IterationReport], None]


class Scheduler(Protocol):
    def run(self, session: EGraphSession, progress: ProgressFn | None = None) -> ScheduleOutcome:
        """Grow the session's e-graph; leave it within the node limit."""
        ...


@dataclass
class _Anchor:
    """An egglog push `LimitedLoop` made, the cycle filter's state then, and the plain ruleset
    steps run since (the pushing iteration's first; each followed by a filter pass if it changed
    the e-graph), in order: replaying them after a pop gives the same e-graph again (egglog is
    deterministic)."""

    filter_state: CycleFilter | None
    redo: list[str] = field(default_factory=list)
    replayable: bool = True  # False once an `apply` step (not a plain ruleset) ran since the push


# An iteration pushes (to be undone by a pop) unless the e-graph, grown by this many times the
# largest growth of an iteration so far, stays within the node limit. A push costs ~20 ms with
# TENSAT's rules (egglog copies every compiled rule), more than a NasRNN iteration.
PUSH_MARGIN = 4


@dataclass
class LimitedLoop:
    """Runs iterations of chosen rulesets under `Limits`, with rollback on node overshoot.

    Schedules (saturate, pulsed epochs, MCTS rollouts) drive it one `iterate` at a time. Rollback:
    an iteration pushes first when it might overshoot (the first one always, one given `apply`
    always); one that did not push and overshoots is undone by popping to the last push and
    replaying the plain steps run since.
    """

    session: EGraphSession
    limits: Limits
    count_classes: bool = True
    started: float = field(default_factory=time.perf_counter)
    reports: list[IterationReport] = field(default_factory=list)
    anchors: list[_Anchor] = field(default_factory=list)
    largest_growth: int = 0

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def check_start(self) -> int:
        """The input's size; a node limit below it is a configuration error."""
        start = self.session.size()
        if start > self.limits.node_limit:
            raise EqdslError.one(f"expected a node limit of at least the input program's "
                                 f"{start} e-nodes, got {self.limits.node_limit}",
                                 path="schedule.node_limit")
        return start

    def run(self, ruleset_for: Callable[[int], str], progress: ProgressFn | None = None,
            cycle_filter: CycleFilter | None = None) -> StopReason:
        """Iterate (ruleset chosen by the 1-based iteration number) until a limit or saturation."""
        stop = self.check_before()
        while stop is None:
            stop = self.iterate(ruleset_for(len(self.reports) + 1), cycle_filter)
            if progress is not None:
                progress(self.reports[-1])
            stop = stop or self.check_before()
        return stop

    def check_before(self) -> StopReason | None:
        if len(self.reports) >= self.limits.iter_limit:
            return StopReason.ITERATION_LIMIT
        if self.elapsed() >= self.limits.time_limit_s:
            return StopReason.TIME_LIMIT
        return None

    def iterate(self, ruleset: str, cycle_filter: CycleFilter | None = None,
                apply: Callable[[], StepResult] | None = None) -> StopReason | None:
        """One iteration of `ruleset` (or of `apply`, reported under that name; then a cycle-filter
        pass, if given, unless the e-graph did not change); returns why the loop must stop now, or
        None to go on."""
        t0 = time.perf_counter()
        before = self.session.size()
        pushed = apply is not None or self._might_overshoot(before)
        if pushed:
            self.session.push()
            self.anchors.append(_Anchor(None if cycle_filter is None else cycle_filter.snapshot()))
        try:
            done = guarded(apply or (lambda: self.session.step(ruleset)), self.budget())
        except EqdslError as err:
            self._undo(pushed, cycle_filter)
            if "Illegal merge" in str(err):
                raise self._unsound_rule(err) from None
            raise
        if isinstance(done, Stopped):  # the state is the one before the step, push included
            self._undo(pushed, cycle_filter, replay=False)
            return self._rolled_back(ruleset, t0, _STOPS[done.cause], {})
        step = done.value
        nodes = self.session.size()  # subsumed nodes still count: filtering cannot change it
        if nodes > self.limits.node_limit:
            self._undo(pushed, cycle_filter)
            return self._rolled_back(ruleset, t0, StopReason.NODE_LIMIT, step.matches, nodes)
        self.largest_growth = max(self.largest_growth, nodes - before)
        filtered, filter_s = 0, 0.0
        if cycle_filter is not None and step.updated:
            t1 = time.perf_counter()
            filtered = cycle_filter.apply(self.session).removed
            filter_s = time.perf_counter() - t1
        self.anchors[-1].redo.append(ruleset)
        self.anchors[-1].replayable &= apply is None
        classes = self.session.count_classes() if self.count_classes else None
        self.reports.append(IterationReport(len(self.reports) + 1, ruleset, nodes, classes,
                                            step.matches, time.perf_counter() - t0, None,
                                            filtered, filter_s))
        return None if step.updated else StopReason.SATURATED

    def budget(self) -> Budget:
        """What one guarded step may use: the memory limit and the time left."""
        return Budget(self.limits.memory_bytes, time.monotonic() + self.limits.time_limit_s - self.elapsed())

    def guard(self, work: Callable[[], T]) -> T | StopReason:
        """`work()` under `budget()` (work that is not an iteration: an MCTS search); the limit
        it passed, with the session as before it, if it was stopped."""
        done = guarded(work, self.budget())
        return _STOPS[done.cause] if isinstance(done, Stopped) else done.value

    def _might_overshoot(self, nodes: int) -> bool:
        return (not self.anchors or not self.anchors[-1].replayable
                or nodes + PUSH_MARGIN * self.largest_growth > self.limits.node_limit)

    def _undo(self, pushed: bool, cycle_filter: CycleFilter | None, replay: bool = True) -> None:
        """Back to the e-graph before this iteration: pop its push, or (`replay`) pop to the last
        push, push again and redo the plain steps since."""
        if pushed:
            self.session.pop()
            self.anchors.pop()
            return
        if not replay:
            return
        anchor = self.anchors[-1]
        self.session.pop()
        self.session.push()
        if cycle_filter is not None and anchor.filter_state is not None:
            cycle_filter.restore(anchor.filter_state)
        for ruleset in anchor.redo:
            if self.session.step(ruleset).updated and cycle_filter is not None:
                cycle_filter.apply(self.session)

    def _unsound_rule(self, err: EqdslError) -> EqdslError:
        """egglog says only that two shapes met in one class: find the rule, by running each
        alone from the same e-graph."""
        for rule in self.session.lowered.language.rules:
            self.session.push()
            try:
                self.session.step(self.session.lowered.rulesets[rule.name])
            except EqdslError:
                return EqdslError.one(f"rule {rule.name} unioned two terms with different shapes: "
                                      "the rule is unsound, or a shape rule is wrong (`eqdsl verify` "
                                      "shows an example)", rule.span)
            finally:
                self.session.pop()
        return err

    def _rolled_back(self, ruleset: str, t0: float, why: StopReason, matches: dict[str, int],
                     nodes: int | None = None) -> StopReason:
        """Record an iteration that was undone (`nodes`: its size, if it finished)."""
        self.reports.append(IterationReport(len(self.reports) + 1, ruleset,
                                            self.session.size() if nodes is None else nodes, None,
                                            matches, time.perf_counter() - t0, why))
        return why


_STOPS = {StopCause.MEMORY: StopReason.MEMORY_LIMIT, StopCause.TIME: StopReason.TIME_LIMIT,
          StopCause.KILLED: StopReason.KILLED}
