"""The optional stages after extraction — translation validation, execution on eqdsl's kernels
(or the source's own runner: Q-gym's convolution kernels), a homomorphic-encryption run (a
source's runner), export (with its runtime check) — behind one protocol, so the pipeline, the report and the CLI
name none of them.

Contract: a `Stage` has a `key` (its `report.json` section), a `section` (its config section, an
`eqdsl.config.Section`: the YAML key and how it is read; `SECTIONS` lists them for
`eqdsl.config.load_config`), `settings(config, loaded)` (that section's settings as read, checked
against the loaded program, None when off), `label(settings)` (its name in the stage
timings) and `run(job, settings)`,
which returns a `Finished`: `ok` (False fails the run: exit 1), `report` (the JSON section),
`lines` (summary lines, each with whether it takes the pass/fail colour), `value` (the stage's
own result: `Validation`, `ExecutionCheck`, `ExportOutcome`) and `files`: names of files it wrote
in `job.folder`, a private temporary folder eqdsl made for the run's stages; only those are
published with the results (a bare name; anything else is refused, so a stage can never make
eqdsl move a user's file). `STAGES` lists them in the order they
run and are reported. Adding a stage is one class and one `STAGES.register` line (or an entry
point in `eqdsl.stages`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from eqdsl import ir
from eqdsl.config import RunConfig, Section
from eqdsl.diagnostics import EqdslError
from eqdsl.execute.executor import ExecutionCheck, check_executable, read_execute
from eqdsl.execute.executor import compare as compare_execution
from eqdsl.exports.base import Candidate, ExportJob, ExportSettings
from eqdsl.exports.registry import EXPORTS, read_export
from eqdsl.fields import int_at_least, option, positive_number, read_section
from eqdsl.frontend import load_program_text
from eqdsl.ir.builder import same_terms
from eqdsl.onnx.weights import random_weights
from eqdsl.registry import Registry
from eqdsl.sources.base import RunnerOutcome, SourceProgram
from eqdsl.verify.validate import Validation, validate


@dataclass(frozen=True)
class StageJob:
    """What a stage sees of the run: the input as loaded and the optimized program."""

    language: ir.Language
    loaded: SourceProgram
    optimized_text: str
    optimized: ir.Program
    predicted_speedup: float
    folder: Path  # eqdsl's temporary folder for the stages' files (see `Finished.files`)
    candidates: tuple[Candidate, ...] = ()  # the next programs after the optimized one (`extract.candidates`)


@dataclass
class Finished:
    key: str
    ok: bool
    report: dict[str, Any]
    lines: list[tuple[str, bool]]  # (text, coloured by ok)
    value: Any
    files: list[str] = field(default_factory=list)  # names in `StageJob.folder` to publish (moved, not copied)


@dataclass(frozen=True)
class ValidateConfig:
    """Run the input and the extracted program on the same random inputs (eqdsl.verify.validate)."""

    samples: int = option(3, int_at_least(1), "an integer >= 1")
    seed: int = option(0, int_at_least(0), "an integer >= 0")
    run_ref: bool = option(True, lambda v: isinstance(v, bool), "true or false")  # a ruleset's `_ref.py`
    time_limit_s: float = option(600.0, positive_number, "a number > 0", float)


@dataclass(frozen=True)
class HeConfig:
    """`he: true` or `{batch: 8, seed: 0}`: the optimized program as a TenSEAL BFV circuit on a
    batch of random inputs (sources that have an HE runner: Q-gym's conv_layer)."""

    batch: int = option(8, int_at_least(1), "an integer >= 1")
    seed: int = option(0, int_at_least(0), "an integer >= 0")


class Stage(Protocol):
    key: str
    section: Section

    def settings(self, config: RunConfig, loaded: SourceProgram) -> Any | None: ...

    def label(self, settings: Any) -> str: ...

    def run(self, job: StageJob, settings: Any) -> Finished: ...


class ValidateStage:
    key = "validation"
    section = Section("validate", lambda value: read_section(value, ValidateConfig, "validate"))

    def settings(self, config: RunConfig, loaded: SourceProgram) -> Any | None:
        return config.sections.get(self.section.key)

    def label(self, settings: Any) -> str:
        return "validate"

    def run(self, job: StageJob, settings: Any) -> Finished:
        if same_terms(job.loaded.program, job.optimized):  # the input itself: nothing to compare it with
            v = Validation(0, 0.0, True, "skipped: the optimized program is the input program")
            report = {"samples": 0, "ok": True, "max_relative_error": 0.0, "message": v.message}
            return Finished(self.key, True, report, [(f"validation: {v.message}", True)], v)
        # the program as written in optimized.eqr, read back: what the user gets is what is checked
        optimized = load_program_text(job.optimized_text, "<extracted program>", job.language)["optimized"]
        v = validate(job.language, job.loaded.program, optimized, settings.samples, settings.seed, settings.run_ref,
                     job.loaded.weights, settings.time_limit_s)
        report = {"samples": v.samples, "ok": v.ok, "max_relative_error": v.max_error, "message": v.message}
        return Finished(self.key, v.ok, report, [(f"validation: {v.message}", True)], v)


class ExecuteStage:
    key = "execution"
    section = Section("execute", read_execute)

    def settings(self, config: RunConfig, loaded: SourceProgram) -> Any | None:
        settings = config.sections.get(self.section.key)
        if settings is not None and self.key in loaded.runners:
            loaded.runners[self.key].check(settings)
        elif settings is not None:
            check_executable(loaded.program, settings.device)
        return settings

    def label(self, settings: Any) -> str:
        return f"execute:{settings.device}"

    def run(self, job: StageJob, settings: Any) -> Finished:
        loaded = job.loaded
        if self.key in loaded.runners:
            return _runner_finished(self.key, loaded.runners[self.key].run(job.optimized, settings))
        weights = loaded.weights if loaded.weights is not None else random_weights(loaded.program)
        e = compare_execution(job.language, loaded.program, job.optimized, weights, settings.device, settings.runs,
                              settings.seed)
        report = {"device": e.device, "ok": e.ok, "max_error": e.max_error, "runs": e.runs,
                  "original_ms": e.original_ms, "optimized_ms": e.optimized_ms, "speedup": e.speedup,
                  "predicted_speedup": job.predicted_speedup, "reference_semantics_ops": list(e.fallback_ops),
                  "input_scale": e.input_scale, "seed": settings.seed}
        return Finished(self.key, e.ok, report, _execution_lines(e, job.predicted_speedup), e)


def _execution_lines(run: ExecutionCheck, predicted: float) -> list[tuple[str, bool]]:
    verdict = "agree" if run.ok else "DISAGREE"
    lines = [(f"executed with eqdsl's {run.device} kernels: outputs {verdict} (largest relative difference "
              f"{run.max_error:.3g}); {run.original_ms:.2f} ms → {run.optimized_ms:.2f} ms ({run.speedup:.2f}×; "
              f"cost model predicted {predicted:.2f}×), median of {run.runs}", True)]
    if run.fallback_ops:
        lines.append((f"  reference semantics (no kernel) for: {', '.join(run.fallback_ops)}", False))
    if run.input_scale < 1:
        lines.append((f"  inputs scaled by {run.input_scale:g}: unit-variance ones overflow float32 in the input "
                      "program", False))
    return lines


class HeStage:
    key = "he"
    section = Section("he", lambda value: read_section(value, HeConfig, "he"))

    def settings(self, config: RunConfig, loaded: SourceProgram) -> Any | None:
        settings = config.sections.get(self.section.key)
        if settings is None:
            return None
        if self.key not in loaded.runners:
            raise EqdslError.one("he: runs programs whose source builds an HE circuit (Q-gym's `conv_layer`); "
                                 "this program's source has none", path="he")
        loaded.runners[self.key].check(settings)
        return settings

    def label(self, settings: Any) -> str:
        return "he"

    def run(self, job: StageJob, settings: Any) -> Finished:
        return _runner_finished(self.key, job.loaded.runners[self.key].run(job.optimized, settings))


def _runner_finished(key: str, out: RunnerOutcome) -> Finished:
    return Finished(key, out.ok, out.report, [(out.lines[0], True), *((line, False) for line in out.lines[1:])], out)


class ExportStage:
    key = "export"
    section = Section("export", read_export)

    def settings(self, config: RunConfig, loaded: SourceProgram) -> Any | None:
        if self.section.key in config.given:  # `export: false` too: the source's default does not apply
            return config.sections[self.section.key]
        return None if loaded.default_export is None else ExportSettings(loaded.default_export)  # the source's

    def label(self, settings: Any) -> str:
        return f"export:{settings.format}"

    def run(self, job: StageJob, settings: ExportSettings) -> Finished:
        loaded = job.loaded
        export_job = ExportJob(job.language, loaded.program, job.optimized, loaded.weights, loaded.source_file,
                               job.predicted_speedup, job.folder, settings, loaded.fixed_inputs, job.candidates)
        out = EXPORTS[settings.format].run(export_job)
        lines = [(f"export: {', '.join(out.files)}", False)] + [(line, True) for line in out.summary]
        return Finished(self.key, out.ok, {**out.report, "ok": out.ok}, lines, out, list(out.files))


STAGES: Registry[Stage] = Registry("stage", "eqdsl.stages")  # in the order they run and are reported
for _stage in (ValidateStage(), ExecuteStage(), HeStage(), ExportStage()):
    STAGES.register(_stage, _stage.key)


def stage_sections() -> tuple[Section, ...]:
    """Every stage's config section (plug-ins' included), for `eqdsl.config.load_config`."""
    return tuple(stage.section for stage in STAGES.values())

