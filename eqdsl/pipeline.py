"""`eqdsl run`: the stages in order — check, lower, load, schedule, extract, validate.

Contract: `run_pipeline(config)` returns a `RunResult` (and the caller writes it, export files included); every stage is
timed under its name. `optimize(language, program, schedule, extract)` is the same optimization
for a library caller holding a program (no config file, no output). User mistakes raise
`EqdslError`. The program comes from a program source (`eqdsl.sources`), the schedule and the
extractors from their registries: this module names none of them.
"""
from __future__ import annotations

import gc
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from eqdsl import ir, status
from eqdsl.config import RunConfig
from eqdsl.cost.layouts import Layouts, Selected, folded_cost, reorder_cost
from eqdsl.cost.measured import MeasuredCosts
from eqdsl.cost.measured import ProgressFn as TimingProgress
from eqdsl.cost.model import CostModel, RuleCosts
from eqdsl.cost.registry import MeasureTarget
from eqdsl.cost.targets import bind_target
from eqdsl.diagnostics import EqdslError
from eqdsl.egglog.live import LiveEGraph
from eqdsl.egglog.lower import Lowered, lower_language
from eqdsl.egglog.readback import program_selection, program_text, selection_program
from eqdsl.egglog.session import EGraphSession
from eqdsl.execute.executor import ExecutionCheck
from eqdsl.exports.base import Candidate, ExportOutcome
from eqdsl.extract.candidates import next_programs
from eqdsl.extract.egraph import Selection, cost_by_op, dag_cost
from eqdsl.extract.greedy import OutOfTime
from eqdsl.extract.registry import ExtractConfig, make_extractor
from eqdsl.extract.result import ExtractBudget, Extraction, Extractor
from eqdsl.frontend import load_language, load_modules, resolve_ruleset
from eqdsl.ir.params import bind_params
from eqdsl.ir.reachable import rules_that_can_fire
from eqdsl.schedule.registry import make_scheduler
from eqdsl.schedule.runner import LimitsConfig, ProgressFn, ScheduleContext, ScheduleOutcome
from eqdsl.sources.base import Baselines, SourceProgram
from eqdsl.sources.registry import load_source, source_inputs
from eqdsl.stages import STAGES, Finished, StageJob
from eqdsl.verify.validate import Validation


@dataclass
class RunResult:
    language: ir.Language
    program: ir.Program
    extract: ExtractConfig
    config: RunConfig | None = None  # None for a library call (`optimize`)
    stages: dict[str, float] = field(default_factory=dict)
    outcome: ScheduleOutcome | None = None
    original_cost: float = 0.0
    extractions: dict[str, Extraction] = field(default_factory=dict)
    live: LiveEGraph | None = None
    lowered: Lowered | None = None
    params: dict[str, int] = field(default_factory=dict)  # the target's values for the cost rules
    baselines: Baselines | None = None  # other methods' costs on the input (from its source)
    finished: dict[str, Finished] = field(default_factory=dict)  # the optional stages that ran (eqdsl.stages)
    stage_folder: tempfile.TemporaryDirectory | None = None  # where the stages wrote their files (eqdsl's own)
    costs: CostModel | None = None  # how nodes are priced (the target's; None: the cost rules on `params`)
    notes: tuple[str, ...] = ()  # what reading the input changed (an ONNX opset conversion)
    alternatives: tuple[ir.Program, ...] = ()  # unioned with `program` at load (SourceProgram.alternatives)
    input_cost_by_op: dict[str, float] = field(default_factory=dict)  # the input's cost by operator
    candidates: tuple[Extraction, ...] = ()  # the next programs after the best (`extract.candidates`)
    runtime_rules: tuple[str, ...] = ()  # the target's runtime makes these rewrites itself (its fusions)
    runtime_input_cost: float | None = None  # the input priced as that runtime runs it (None: no such rules)
    layouts: Layouts | None = None  # the target runtime's blocked layout (eqdsl.cost.layouts)
    input_reorders: float = 0.0  # what the input (as the runtime runs it) spends in layout reorders
    input_folds: float = 0.0  # what of the input's cost the runtime runs inside a neighbour (a Conv's bias)

    @property
    def validation(self) -> Validation | None:
        return self._stage_value("validation")

    @property
    def execution(self) -> ExecutionCheck | None:
        return self._stage_value("execution")

    @property
    def export(self) -> ExportOutcome | None:
        return self._stage_value("export")

    def _stage_value(self, key: str) -> Any:
        done = self.finished.get(key)
        return None if done is None else done.value

    @property
    def measured(self) -> MeasuredCosts | None:
        """The measured cost model, when the target measures (`target: {measure: ...}`)."""
        return self.costs if isinstance(self.costs, MeasuredCosts) else None

    @property
    def best(self) -> Extraction:
        return self.extractions[self.extract.method]

    @property
    def input_cost(self) -> float:
        """What the input costs where it runs: as the target's runtime runs it (after its own
        fusions) where the target names them, else as written."""
        return self.original_cost if self.runtime_input_cost is None else self.runtime_input_cost

    @property
    def predicted_speedup(self) -> float:
        """The cost model's input cost (as the runtime runs it) over the best extraction's, each
        with its layout reorders."""
        return self._speedup(self.best)

    def _speedup(self, e: Extraction) -> float:
        cost = e.cost + self.reorders(e.selection) - self.folds(e.selection)
        return (self.input_cost + self.input_reorders - self.input_folds) / cost if cost > 0 else float("nan")

    def reorders(self, selection: Selection, live: LiveEGraph | None = None) -> float:
        """What `selection` (of `live`, by default the run's e-graph) spends in layout reorders
        on the target's runtime (0 where the target names no blocked layout)."""
        program = self._selected(selection, live)
        return 0.0 if program is None else reorder_cost(program[0], program[1], self.params)

    def folds(self, selection: Selection, live: LiveEGraph | None = None) -> float:
        """What of `selection`'s cost the target's runtime runs inside a neighbour: a bias, BatchNorm
        or Relu folded into the Conv before it, a Pad written into the one after (0 where the target
        names no layout)."""
        program = self._selected(selection, live)
        return 0.0 if program is None else folded_cost(*program)

    def _selected(self, selection: Selection, live: LiveEGraph | None) -> tuple[Layouts, Selected] | None:
        """The target's layouts and `selection` as a program of `live` (the run's e-graph by
        default); None where the target names no layout."""
        live = live or self.live
        if self.layouts is None or live is None:
            return None
        names = {op.name: tuple(p.name for p in op.params) for op in self.language.ops.values()}
        return self.layouts, Selected(live.problem, selection, live.shapes, live.values, names)

    @property
    def optimized_text(self) -> str:
        assert self.live is not None
        return program_text(self.live, self.best.selection)

    def optimized_program(self, name: str = "optimized") -> ir.Program:
        assert self.live is not None
        return selection_program(self.live, self.best.selection, name)

    def candidate_programs(self) -> tuple[Candidate, ...]:
        """The next programs after the best, each with the cost model's speedup over the input."""
        assert self.live is not None
        return tuple(Candidate(f"candidate-{k}", selection_program(self.live, e.selection, f"candidate{k}"),
                               self._speedup(e))
                     for k, e in enumerate(self.candidates, start=2))


@contextmanager
def _stage(result: RunResult, name: str) -> Iterator[None]:
    t0 = time.perf_counter()
    with status.stage(name):
        yield
    result.stages[name] = result.stages.get(name, 0.0) + time.perf_counter() - t0


def config_inputs(config: RunConfig) -> list[Path]:
    """Every file a run reads (an output folder must not contain any of them): the config, the
    program's files, the ruleset and every file it includes (with their `_ref.py`), the target
    file and the timing cache."""
    inputs = [config.source, *source_inputs(config.program)]
    for module in load_modules(resolve_ruleset(config.ruleset, config.source.parent)):
        file = Path(module.file)
        inputs += [file, file.with_name(file.stem + "_ref.py")]
    if config.target is not None:
        inputs += config.target.inputs()
    return inputs


def _start(config: RunConfig, timing: TimingProgress | None = None) -> tuple[RunResult, SourceProgram]:
    t_check = time.perf_counter()
    with status.stage("check"):
        lang = load_language(config.ruleset, config.source.parent)
        loaded = load_source(config.program, lang)
        target = config.target
        params = target.params(lang) if target is not None else bind_target(lang, None)
        costs = target.cost_model(lang, timing) if target is not None else RuleCosts(lang, params)
        runtime_rules = target.runtime_rules(lang) if target is not None else ()
    result = RunResult(lang, loaded.program, config.extract, config, {"check": time.perf_counter() - t_check},
                       params=params, baselines=loaded.baselines, costs=costs, notes=loaded.notes,
                       alternatives=loaded.alternatives, runtime_rules=runtime_rules,
                       layouts=target.layouts() if target is not None else None)
    return result, loaded


def measure_costs(config: RunConfig, timing: TimingProgress | None = None,
                  progress: ProgressFn | None = None) -> RunResult:
    """`eqdsl measure`: explore the e-graph a run of `config` would, and time every operator
    configuration it holds on the config's measuring target (filling the timing cache); no
    extraction. `timing(done, total, op)` reports the timing loop."""
    if not isinstance(config.target, MeasureTarget):
        raise EqdslError.one("expected a measuring target, e.g. `target: {measure: ort, fallback: cpu}`",
                             path="target")
    result, _ = _start(config, timing)
    session = _explore(result, config.schedule, progress)
    with _stage(result, "measure"):
        session.live()
    return result


def run_pipeline(config: RunConfig, progress: ProgressFn | None = None) -> RunResult:
    result, loaded = _start(config)
    stages = [(stage, stage.settings(config, loaded)) for stage in STAGES.values()]  # a stage refuses before any work
    _optimize(result, config.schedule, progress)
    job: StageJob | None = None
    for stage, settings in stages:
        if settings is None:
            continue
        if job is None:
            result.stage_folder = tempfile.TemporaryDirectory(prefix="eqdsl-stages-")
            job = StageJob(result.language, loaded, result.optimized_text, result.optimized_program(),
                           result.predicted_speedup, Path(result.stage_folder.name), result.candidate_programs())
        with _stage(result, stage.label(settings)):
            result.finished[stage.key] = stage.run(job, settings)
    return result


def optimize(language: ir.Language, program: ir.Program, schedule: LimitsConfig, extract: ExtractConfig,
             params: dict[str, int] | None = None, progress: ProgressFn | None = None,
             alternatives: tuple[ir.Program, ...] = ()) -> RunResult:
    """Optimize `program` (of `language`) with a schedule config (`SaturateConfig`,
    `PulsedConfig`, …) and extract with `extract.method` (and `extract.compare`); `alternatives`
    are programs equal to it root by root, searched from together with it."""
    result = RunResult(language, program, extract, params=dict(params or {}), alternatives=alternatives)
    return _optimize(result, schedule, progress)


def _optimize(result: RunResult, schedule: LimitsConfig, progress: ProgressFn | None) -> RunResult:
    with _no_full_collections():
        return _explore_and_extract(result, schedule, progress)


@contextmanager
def _no_full_collections() -> Iterator[None]:
    """Python's cyclic collector runs only on young objects inside the block; its thresholds are
    restored after it. Why: a full collection walks every live object (the checked language,
    lark's trees: long-lived, never garbage during a run); two of them took 0.11 s of NasRNN's
    0.7 s of exploring and extracting. Young cycles are still freed."""
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], 1 << 30)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def _explore_and_extract(result: RunResult, schedule: LimitsConfig, progress: ProgressFn | None) -> RunResult:
    session = _explore(result, schedule, progress)
    with _stage(result, "serialize"):
        result.live = session.live()
    extract = result.extract
    for method in [extract.method] + [m for m in extract.compare if m != extract.method]:
        with _stage(result, f"extract:{method}"):
            try:
                result.extractions[method] = make_extractor(method, extract).extract(result.live.problem)
            except OutOfTime as late:
                if method == extract.method:
                    raise
                result.notes += (f"extract.compare: {late.diagnostics[0].message}; left out of the comparison",)
    if extract.candidates > 1:
        with _stage(result, "extract:candidates"):
            result.candidates = tuple(_next_programs(result))
    return result


def _next_programs(result: RunResult) -> list[Extraction]:
    """`eqdsl.extract.candidates`, with the main extractor and its time limit once more."""
    extract, live = result.extract, result.live
    assert live is not None

    def make(seconds: float) -> Extractor:
        return make_extractor(extract.method, extract, budget=ExtractBudget(seconds, extract.workers,
                                                                            extract.deterministic))

    return next_programs(live.problem, make, result.best, extract.candidates,
                         program_selection(live, result.program), extract.time_limit_s)


def _explore(result: RunResult, schedule: LimitsConfig, progress: ProgressFn | None) -> EGraphSession:
    with _stage(result, "lower"):
        language = bind_params(result.language, result.params)
        firing = rules_that_can_fire(language, [result.program, *result.alternatives])
        if len(firing.rules) < len(language.rules):
            result.notes += (f"rules: {len(firing.rules)} of {len(language.rules)} can fire on this program (the "
                             "others need an operator it can never hold: left out)",)
        result.lowered = lower_language(firing)
        session = EGraphSession(result.lowered, result.costs or RuleCosts(result.language, result.params))
    with _stage(result, "load"):
        session.load(result.program)
        result.original_cost, result.input_cost_by_op, as_written = check_input(session, result.program)
        _price_as_run(result, as_written, session)  # before the runtime's rules change the e-graph
        if result.runtime_rules:
            ran = as_the_runtime_runs(session, result)
            result.runtime_input_cost = min(result.original_cost, ran.cost)
            if ran.cost < result.original_cost:
                _price_as_run(result, ran.selection, session)
        if result.alternatives:
            session.union_alternatives(result.program, result.alternatives)
    with _stage(result, "schedule"):
        context = ScheduleContext(result.language, result.params, result.extract)
        result.outcome = make_scheduler(schedule, context).run(session, progress)
    return session


def _price_as_run(result: RunResult, selection: Selection, session: EGraphSession) -> None:
    """The input's layout reorders and folds on the target's runtime."""
    result.input_reorders = result.reorders(selection, session.live())
    result.input_folds = result.folds(selection, session.live())


RUNTIME_RULESET = "runtime"
RUNTIME_PASSES = 20  # fusions apply once per operator: a few passes saturate them


def as_the_runtime_runs(session: EGraphSession, result: RunResult) -> Extraction:
    """The loaded input's cost after the rewrites its runtime makes itself (`runtime_rules`: its
    fusions), run to saturation on the session before any search; the cheapest such program by
    a greedy DAG extraction. The search later finds these nodes too: they are rules of the run."""
    session.define_ruleset(RUNTIME_RULESET, list(result.runtime_rules))
    for _ in range(RUNTIME_PASSES):
        if not session.step(RUNTIME_RULESET).updated:
            break
    return make_extractor("greedy-dag", result.extract).extract(session.live().problem)


def check_input(session: EGraphSession, program: ir.Program) -> tuple[float, dict[str, float], Selection]:
    """Reject an ill-shaped input program; return its DAG cost, that cost by operator and its
    selection (each class holds one node now)."""
    live = session.live()
    p = live.problem
    lang = session.lowered.language
    for node in p.nodes:
        sort = lang.ops[node.op].result if node.op in lang.ops else None
        if sort and lang.sorts[sort].shape_type is not None and p.class_ids[node.eclass] not in live.shapes:
            raise EqdslError.one(f"program '{program.name}' is ill-shaped: a '{node.op}' node fails "
                                 f"the requirements of its shape rule (or a child's)",
                                 lang.shapes[node.op].span)
    selection = {c: nodes[0] for c, nodes in enumerate(p.class_nodes) if nodes}
    return dag_cost(p, selection), cost_by_op(p, selection), selection
