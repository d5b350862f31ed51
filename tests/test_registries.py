"""Registries: a new extractor or schedule kind is one module + one registry line, and it is then
accepted by config validation, listed by the CLI and built by the pipeline."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import ClassVar

import pytest

from eqdsl import pipeline, report, stages
from eqdsl.cli import build_parser
from eqdsl.config import Section, parse_config
from eqdsl.cost import registry as targets
from eqdsl.diagnostics import EqdslError
from eqdsl.extract import registry as extractors
from eqdsl.extract import starts
from eqdsl.extract.egraph import ExtractionProblem, dag_cost, problem_from_json, reachable
from eqdsl.extract.result import Extraction, ExtractStatus
from eqdsl.fields import int_at_least, one_of, option
from eqdsl.output import Scratch
from eqdsl.pipeline import run_pipeline
from eqdsl.registry import Registry
from eqdsl.report import write_outputs
from eqdsl.schedule import registry as schedules
from eqdsl.schedule.runner import LimitsConfig, ScheduleOutcome, StopReason
from eqdsl.stages import Finished

from conftest import EXAMPLES
from test_extract import SHARED


@dataclass(frozen=True)
class FirstOptions:
    pick: str = option("first", one_of(("first", "last")), "one of first, last", help="which node of each class")


@dataclass(frozen=True)
class FirstNodeExtractor:
    """The toy: each class's first (or last) node (valid on acyclic e-graphs)."""

    pick: str = "first"

    def extract(self, problem: ExtractionProblem) -> Extraction:
        t0 = time.perf_counter()
        at = 0 if self.pick == "first" else -1
        selection = {c: nodes[at] for c, nodes in enumerate(problem.class_nodes) if nodes}
        return Extraction("first", selection, dag_cost(problem, selection), ExtractStatus.HEURISTIC,
                          time.perf_counter() - t0)


@dataclass(frozen=True)
class IdleConfig(LimitsConfig):
    kind: ClassVar[str] = "idle"
    naps: int = option(1, int_at_least(0), "an int ≥ 0")


@dataclass(frozen=True)
class IdleScheduler:
    naps: int

    def run(self, session, progress=None) -> ScheduleOutcome:
        nodes = session.size()
        return ScheduleOutcome(StopReason.SATURATED, (), nodes, 0.0, nodes, (f"{self.naps} naps",))


@pytest.fixture
def toy_extractor(monkeypatch):
    monkeypatch.setattr(extractors, "EXTRACTORS", extractors.EXTRACTORS.copy())
    monkeypatch.setattr(starts, "STARTS", dict(starts.STARTS))
    extractors.register_extractor(extractors.ExtractorKind(
        "first", lambda options, budget: FirstNodeExtractor(options.pick), "each class's first node",
        options=FirstOptions, start=FirstNodeExtractor().extract))


@pytest.fixture
def idle_schedule(monkeypatch):
    monkeypatch.setattr(schedules, "SCHEDULES", schedules.SCHEDULES.copy())
    schedules.register_schedule(schedules.ScheduleKind("idle", IdleConfig,
                                                       lambda cfg, ctx: IdleScheduler(cfg.naps), "grows nothing"))


@dataclass(frozen=True)
class UnitTarget:
    """The toy target kind: every operator node costs `each` (its cost model counts nodes)."""

    kind: ClassVar[str] = "unit"
    each: float = 1.0

    @classmethod
    def read(cls, data, base):
        return cls(float(data.get("each", 1.0)))

    def params(self, lang):
        return {}

    def runtime_rules(self, lang):
        return ()

    def layouts(self):
        return None

    def cost_model(self, lang, progress=None):
        each = self.each

        class UnitCosts:  # the toy cost model: one `price` method is the whole CostModel protocol
            def price(self, requests):
                return [each] * len(requests)
        return UnitCosts()

    def inputs(self):
        return []


@pytest.fixture
def unit_target(monkeypatch):
    monkeypatch.setattr(targets, "TARGET_KINDS", targets.TARGET_KINDS.copy())
    targets.TARGET_KINDS.register(UnitTarget, UnitTarget.kind)


def _config(tmp_path, **sections):
    return parse_config({"ruleset": "arith", "program": str(EXAMPLES / "arith" / "input.eqr"), **sections},
                        tmp_path / "c.yaml")


def test_toy_extractor_is_accepted_by_config_and_cli(tmp_path, toy_extractor, run_cli):
    cfg = _config(tmp_path, extract={"method": "first", "compare": ["first", "greedy"]})
    assert cfg.extract.method == "first"
    assert "first" in build_parser().parse_args(["extract", "g.json", "--extractor", "first"]).extractor
    f = tmp_path / "g.json"
    f.write_text(json.dumps(SHARED))
    code, out, err = run_cli("extract", f, "--extractor", "first")
    assert code == 0, err
    assert "extractor first: cost" in out


def test_toy_extractor_options_are_config_keys_and_flags(tmp_path, toy_extractor, run_cli, capfd):
    """Its options class gives it an `extract:` key and a flag with help; its start is a warm start."""
    cfg = _config(tmp_path, extract={"method": "first", "pick": "last", "warm_start": "first"})
    assert cfg.extract.options_for("first") == FirstOptions("last")
    assert cfg.extract.options_for("cpsat").warm_start == "first"
    with pytest.raises(EqdslError, match="extract.pick: error: expected one of first, last"):
        _config(tmp_path, extract={"pick": "middle"})
    assert "first: which node of each class" in " ".join(build_parser()._subparsers._group_actions[0]
                                                          .choices["extract"].format_help().split())
    f = tmp_path / "g.json"
    f.write_text(json.dumps(SHARED))
    code, out, err = run_cli("extract", f, "--extractor", "first", "--pick", "last")
    assert code == 0, err
    last = FirstNodeExtractor("last").extract(problem_from_json(SHARED))
    assert f"extractor first: cost {last.cost:g}" in out
    code, out, err = run_cli("extract", f, "--extractor", "cpsat", "--warm-start", "first", "--time-limit", "5")
    assert code == 0 and "extractor cpsat: cost" in out, err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["extract", "g.json", "--pick", "middle"])
    assert "argument --pick: expected one of first, last, got 'middle'" in capfd.readouterr().err


def test_unknown_extractor_lists_the_registered_ones(tmp_path, toy_extractor):
    with pytest.raises(EqdslError) as info:
        _config(tmp_path, extract={"method": "nope"})
    d = info.value.diagnostics[0]
    assert d.path == "extract.method" and "first" in d.message and "cpsat" in d.message


def test_without_the_registration_the_toy_is_refused(tmp_path):
    with pytest.raises(EqdslError):
        _config(tmp_path, extract={"method": "first"})
    with pytest.raises(SystemExit):
        build_parser().parse_args(["extract", "g.json", "--extractor", "first"])


def test_toy_schedule_runs_through_the_pipeline(tmp_path, idle_schedule, toy_extractor):
    cfg = _config(tmp_path, schedule={"kind": "idle", "naps": 3, "node_limit": 100},
                  extract={"method": "first", "compare": []})
    assert isinstance(cfg.schedule, IdleConfig) and cfg.schedule.naps == 3
    result = run_pipeline(cfg)
    assert result.outcome.notes == ("3 naps",)
    assert result.best.method == "first" and result.best.cost == result.original_cost


def test_toy_cost_model_prices_the_run(tmp_path, unit_target):
    """A new cost kind = one class + one registry line: the run's every cost is the toy's."""
    cfg = _config(tmp_path, target={"kind": "unit", "each": 2.0}, schedule={"iter_limit": 3})
    assert isinstance(cfg.target, UnitTarget)
    result = run_pipeline(cfg)
    assert result.original_cost == 2.0 * len(result.program.nodes) == 8.0  # div, mul, var, num (shared)
    assert result.best.cost == 2.0 * len(result.optimized_program().nodes) == 2.0  # var("a")


def _read_audit(value):
    if value is not None and not (isinstance(value, dict) and isinstance(value.get("most"), int)):
        raise EqdslError.one(f"expected {{most: N}}, got {value!r}", path="audit")
    return 0 if value is None else value["most"]


class AuditStage:
    """The toy stage: always runs, fails when the optimized program has more nodes than its
    config section's `audit: {most: N}` (0 by default)."""

    key = "audit"
    section = Section("audit", _read_audit)

    def settings(self, config, loaded):
        return config.sections.get(self.section.key, 0)  # 0 also where its section was not declared

    def label(self, settings):
        return "audit"

    def run(self, job, most):
        nodes = len(job.optimized.nodes)
        return Finished(self.key, nodes <= most, {"nodes": nodes}, [(f"audit: {nodes} node(s)", True)], nodes)


def test_toy_stage_reports_and_fails_the_run(tmp_path, monkeypatch, run_cli):
    """A new optional stage = one class + one `STAGES.register`: the run, report.json, the summary
    and the exit code pick it up, and none of them names it."""
    monkeypatch.setattr(stages, "STAGES", stages.STAGES.copy())
    stages.STAGES.register(AuditStage(), AuditStage.key)
    monkeypatch.setattr(pipeline, "STAGES", stages.STAGES)
    monkeypatch.setattr(report, "STAGES", stages.STAGES)
    (tmp_path / "c.yaml").write_text(f"ruleset: arith\nprogram: {EXAMPLES / 'arith' / 'input.eqr'}\n")
    code, out, _ = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 1 and "audit: 1 node(s)" in out  # var("a"): one node, more than 0
    assert json.loads((tmp_path / "out" / "report.json").read_text())["audit"] == {"nodes": 1}
    # its config section is its own: read, checked and recorded as every other
    code, out, _ = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out2", "--quiet", "--set", "audit={most: 3}")
    ran = json.loads((tmp_path / "out2" / "report.json").read_text())
    assert code == 0 and ran["effective_config"]["audit"] == 3
    code, _, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out3", "--set", "audit=lots")
    assert code == 2 and "audit: error: expected {most: N}, got 'lots'" in err


class GrabbyStage(AuditStage):
    """A stage that names a file outside its folder: publishing must refuse it, never move it."""

    def run(self, job, most):
        return Finished(self.key, True, {}, [], None, [str(self.victim)])


def test_a_stage_cannot_publish_a_file_outside_its_folder(tmp_path, monkeypatch):
    victim = tmp_path / "users-file.txt"
    victim.write_text("mine")
    GrabbyStage.victim = victim
    only = Registry("stage")
    only.register(GrabbyStage(), GrabbyStage.key)
    monkeypatch.setattr(pipeline, "STAGES", only)
    result = run_pipeline(_config(tmp_path))
    with pytest.raises(ValueError, match="expected a file name in its folder"):
        write_outputs(result, Scratch(tmp_path / "out"))
    assert victim.read_text() == "mine"


def test_a_key_of_another_kind_is_named_as_such(tmp_path, idle_schedule):
    with pytest.raises(EqdslError) as info:
        _config(tmp_path, schedule={"kind": "saturate", "naps": 3})
    d = info.value.diagnostics[0]
    assert d.path == "schedule.naps" and "`kind: idle` only" in d.message


@pytest.mark.parametrize("method", extractors.extractor_names())
def test_every_registered_extractor_gives_a_valid_selection(method):
    problem = problem_from_json(SHARED)
    e = extractors.make_extractor(method, extractors.ExtractConfig(time_limit_s=10)).extract(problem)
    reachable(problem, e.selection)  # complete and acyclic
    assert e.cost == dag_cost(problem, e.selection)
    if e.status is ExtractStatus.OPTIMAL:
        assert e.cost == 10  # the shared form (see SHARED)


@pytest.mark.parametrize("kind", schedules.schedule_names())
def test_every_schedule_kind_reads_its_defaults(tmp_path, kind):
    cfg = _config(tmp_path, schedule={"kind": kind})
    assert type(cfg.schedule) is schedules.SCHEDULES[kind].config


def test_every_kind_is_one_registry_shape_with_entry_points_and_a_suggestion(tmp_path):
    """Sources, schedules, extractors, target kinds and exports: one `Registry` each, an entry-point
    group each, and a mistyped name answered with the names and the closest one."""
    from eqdsl.exports.registry import EXPORTS
    from eqdsl.registry import Registry
    from eqdsl.sources.registry import SOURCES

    kinds = [SOURCES, schedules.SCHEDULES, extractors.EXTRACTORS, targets.TARGET_KINDS, EXPORTS, stages.STAGES]
    assert all(isinstance(k, Registry) and k.group and k.group.startswith("eqdsl.") for k in kinds)
    with pytest.raises(EqdslError) as err:
        targets.TARGET_KINDS.lookup("rooflin", "target.kind")
    d = err.value.diagnostics[0]
    assert d.path == "target.kind" and "roofline, measure" in d.message and "did you mean 'roofline'" in d.message
    with pytest.raises(EqdslError, match="did you mean 'roofline'"):
        _config(tmp_path, target={"kind": "rooflin"})
    toy = Registry("toy", None)
    toy.register(object(), "a")
    copy = toy.copy()
    copy.register(object(), "b")
    assert toy.names() == ["a"] and copy.names() == ["a", "b"]
