"""`eqdsl run`: the stages in order — check, lower, load, schedule, extract, report.

Contract: `run_pipeline(config)` returns a `RunResult` (and the caller writes it); every stage is
timed under its name. User mistakes raise `EqdslError`.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from eqdsl import ir
from eqdsl.check import load_language, load_program_file, load_program_text
from eqdsl.cost.targets import bind_target, load_target
from eqdsl.diagnostics import EqdslError
from eqdsl.engine import EGraphSession
from eqdsl.extract.cpsat import CpSatExtractor
from eqdsl.extract.dag import GreedyDagExtractor
from eqdsl.extract.egraph import dag_cost
from eqdsl.extract.greedy import GreedyExtractor
from eqdsl.extract.live import LiveEGraph, live_problem, program_text
from eqdsl.extract.result import Extraction, Extractor
from eqdsl.lower.egglog import Lowered, lower_language
from eqdsl.schedule.config import ExtractConfig, ProgramRef, RunConfig, ScheduleConfig
from eqdsl.schedule.runner import Limits, ProgressFn, ScheduleOutcome, Scheduler
from eqdsl.schedule.pulsed import PulsedScheduler
from eqdsl.schedule.saturate import SaturateScheduler
from eqdsl.verify.validate import Validation, validate
from eqdsl.worker import default_memory_bytes


@dataclass
class RunResult:
    config: RunConfig
    language: ir.Language
    program: ir.Program
    stages: dict[str, float] = field(default_factory=dict)
    outcome: ScheduleOutcome | None = None
    original_cost: float = 0.0
    extractions: dict[str, Extraction] = field(default_factory=dict)
    live: LiveEGraph | None = None
    lowered: Lowered | None = None
    params: dict[str, int] = field(default_factory=dict)  # the target's values for the cost rules
    validation: Validation | None = None  # translation validation, when the config asks for it
    baselines: dict[str, float] = field(default_factory=dict)  # other methods' costs (conv_layer)

    @property
    def best(self) -> Extraction:
        return self.extractions[self.config.extract.method]

    @property
    def optimized_text(self) -> str:
        assert self.live is not None
        return program_text(self.live, self.best.selection)


@contextmanager
def _stage(result: RunResult, name: str):
    t0 = time.perf_counter()
    yield
    result.stages[name] = result.stages.get(name, 0.0) + time.perf_counter() - t0


def make_scheduler(cfg: ScheduleConfig, extract: ExtractConfig, lang: ir.Language,
                   params: dict[str, int]) -> Scheduler:
    match cfg.kind:
        case "saturate":
            limits = Limits(cfg.iter_limit, cfg.node_limit, cfg.time_limit_s, memory_bytes(cfg))
            return SaturateScheduler(limits, cfg.k_multi, cfg.class_counts, cfg.cycle_filter)
        case "pulsed":
            known = {r.name for r in lang.single_rules}
            for name in cfg.rules or ():
                if name not in known:
                    raise EqdslError.one(f"unknown rule {name!r}; expected one of the language's "
                                         f"single-pattern rules: {', '.join(sorted(known))}",
                                         path="schedule.rules")
            limits = Limits(cfg.explore_iter, cfg.node_limit, cfg.time_limit_s, memory_bytes(cfg))
            epoch_cfg = replace(extract, time_limit_s=cfg.epoch_time_limit_s)
            return PulsedScheduler(limits, cfg.epochs, make_extractor(cfg.epoch_extract, epoch_cfg),
                                   params, cfg.rules)
        case _:
            raise EqdslError.one(f"unknown schedule kind {cfg.kind!r}", path="schedule.kind")


def memory_bytes(cfg: ScheduleConfig) -> int:
    return default_memory_bytes() if cfg.memory_limit_mb is None else cfg.memory_limit_mb << 20


def make_extractor(method: str, cfg: ExtractConfig) -> Extractor:
    match method:
        case "greedy":
            return GreedyExtractor()
        case "greedy-dag":
            return GreedyDagExtractor()
        case "cpsat":
            return CpSatExtractor(cfg.time_limit_s, cfg.acyclic, cfg.warm_start, cfg.workers)
        case _:
            raise EqdslError.one(f"unknown extractor {method!r}", path="extract.method")


def input_program(config: RunConfig, lang: ir.Language) -> tuple[ir.Program, dict[str, float]]:
    """The program to optimize and, for a `conv_layer` builder, the other methods' costs on it."""
    if config.program.builder == "conv_layer":
        from eqdsl.qgym.study import conv_layer_input

        return conv_layer_input(lang, dict(config.program.params), config.source.parent)
    return select_program(config.program, lang), {}


def select_program(ref: ProgramRef, lang: ir.Language) -> ir.Program:
    if ref.builder is not None:
        from eqdsl.lang.models import build_model

        return build_model(lang, ref.builder, **dict(ref.params))
    programs = dict(lang.programs)
    if ref.file is not None:
        programs = load_program_file(ref.file, lang)
    elif ref.text is not None:
        programs = load_program_text(ref.text, "<config program.text>", lang)
    if ref.name is not None:
        if ref.name not in programs:
            raise EqdslError.one(f"no program named {ref.name!r}; found: {', '.join(programs) or 'none'}",
                                 path="program.name")
        return programs[ref.name]
    if len(programs) != 1:
        raise EqdslError.one(f"expected exactly one program (or `program.name`), found "
                             f"{len(programs)}: {', '.join(programs) or 'none'}", path="program")
    return next(iter(programs.values()))


def config_inputs(config: RunConfig) -> list[Path]:
    """The files a run reads (an output folder must not contain any of them)."""
    inputs = [config.source]
    if config.program.file is not None:
        inputs.append(config.program.file)
    ruleset = config.source.parent / config.ruleset
    if ruleset.is_file():
        inputs.append(ruleset)
    weights = dict(config.program.params).get("weights")
    if isinstance(weights, str):
        inputs.append(config.source.parent / weights)
    return inputs


def run_pipeline(config: RunConfig, progress: ProgressFn | None = None) -> RunResult:
    t_check = time.perf_counter()
    lang = load_language(config.ruleset, config.source.parent)
    program, baselines = input_program(config, lang)
    target = load_target(config.target, config.source.parent) if config.target else None
    result = RunResult(config, lang, program, {"check": time.perf_counter() - t_check},
                       params=bind_target(lang, target), baselines=baselines)
    with _stage(result, "lower"):
        result.lowered = lower_language(lang)
        session = EGraphSession(result.lowered)
    with _stage(result, "load"):
        session.load(program)
        result.original_cost = check_input(session, result.lowered, program, result.params)
    with _stage(result, "schedule"):
        scheduler = make_scheduler(config.schedule, config.extract, lang, result.params)
        result.outcome = scheduler.run(session, progress)
    with _stage(result, "serialize"):
        result.live = live_problem(session.serialize(), result.lowered, result.params)
    methods = [config.extract.method] + [m for m in config.extract.compare if m != config.extract.method]
    for method in methods:
        with _stage(result, f"extract:{method}"):
            result.extractions[method] = make_extractor(method, config.extract).extract(result.live.problem)
    if config.validate is not None:
        with _stage(result, "validate"):
            optimized = load_program_text(result.optimized_text, "<extracted program>", lang)["optimized"]
            result.validation = validate(lang, program, optimized, config.validate.samples,
                                         config.validate.seed)
    return result


def check_input(session: EGraphSession, lowered: Lowered, program: ir.Program,
                params: dict[str, int] | None = None) -> float:
    """Reject an ill-shaped input program; return its DAG cost (each class holds one node now)."""
    live = live_problem(session.serialize(), lowered, params)
    p = live.problem
    lang = lowered.language
    for node in p.nodes:
        sort = lang.ops[node.op].result if node.op in lang.ops else None
        if sort and lang.sorts[sort].shape_type is not None and p.class_ids[node.eclass] not in live.shapes:
            raise EqdslError.one(f"program '{program.name}' is ill-shaped: a '{node.op}' node fails "
                                 f"the requirements of its shape rule (or a child's)",
                                 lang.shapes[node.op].span)
    selection = {c: nodes[0] for c, nodes in enumerate(p.class_nodes) if nodes}
    return dag_cost(p, selection)
