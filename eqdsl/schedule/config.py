"""YAML run configuration → frozen dataclasses, validated with errors that name the YAML path.

Contract: `load_config(path)` returns a `RunConfig` or raises `EqdslError` whose diagnostic names
the path of the bad key (`schedule.k_multi: expected an int ≥ 0, got 'one'`). Unknown keys are
errors. Relative file paths are resolved against the config file's folder.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import yaml

from eqdsl.diagnostics import EqdslError

SCHEDULE_KINDS = ("saturate", "pulsed")
EXTRACTORS = ("greedy", "greedy-dag", "cpsat")
ACYCLIC = ("order", "lazy", "filter-list")
CYCLE_FILTERS = ("none", "efficient", "vanilla")


@dataclass(frozen=True)
class ScheduleConfig:
    kind: str = "saturate"
    iter_limit: int = 15
    node_limit: int = 50_000
    time_limit_s: float = 60.0
    memory_limit_mb: int | None = None  # None: half the machine's memory (eqdsl.worker)
    k_multi: int = 1
    class_counts: bool = True  # count e-classes every iteration (costs a freeze of the e-graph)
    cycle_filter: str = "none"
    # pulsed only (eqdsl.schedule.pulsed): epochs of `explore_iter` iterations, each ended by
    # an extraction of every root with `epoch_extract` under `epoch_time_limit_s`
    epochs: int = 4
    explore_iter: int = 3
    epoch_extract: str = "cpsat"
    epoch_time_limit_s: float = 10.0
    rules: tuple[str, ...] | None = None  # the rules exploration runs; None: all single-pattern


PULSED_KEYS = ("epochs", "explore_iter", "epoch_extract", "epoch_time_limit_s", "rules")


@dataclass(frozen=True)
class ExtractConfig:
    method: str = "cpsat"
    time_limit_s: float = 60.0
    acyclic: str = "order"
    warm_start: str | None = "greedy-dag"
    compare: tuple[str, ...] = ("greedy", "greedy-dag")
    workers: int = 1  # one CP-SAT worker with the full LP relaxation proves DAG optima fastest here


@dataclass(frozen=True)
class ProgramRef:
    file: Path | None
    name: str | None
    text: str | None
    builder: str | None = None  # a Python model builder (eqdsl.lang.models), with `params`
    params: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class RunConfig:
    source: Path
    ruleset: str
    program: ProgramRef
    schedule: ScheduleConfig
    extract: ExtractConfig
    output: Path
    raw: dict
    target: str | None = None  # a shipped target name or a .yaml path (eqdsl.cost.targets)
    validate: ValidateConfig | None = None  # translation validation after extraction (off: None)


@dataclass(frozen=True)
class ValidateConfig:
    """Run the input and the extracted program on the same random inputs (eqdsl.verify.validate)."""

    samples: int = 3
    seed: int = 0


def _fail(path: str, expected: str, got: Any) -> EqdslError:
    return EqdslError.one(f"expected {expected}, got {got!r}", path=path)


class _Reader:
    """Reads one mapping, remembering which keys were used so unknown ones can be reported."""

    def __init__(self, data: Any, path: str) -> None:
        if not isinstance(data, dict):
            raise _fail(path or "<top level>", "a mapping", data)
        self.data, self.path, self.used = data, path, set()

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, default: Any, check: Callable[[Any], bool], expected: str) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is _REQUIRED:
                raise EqdslError.one(f"missing required key; expected {expected}", path=self.at(key))
            return default
        value = self.data[key]
        if not check(value):
            raise _fail(self.at(key), expected, value)
        return value

    def finish(self) -> None:
        unknown = sorted(str(k) for k in self.data if k not in self.used)
        if unknown:
            raise EqdslError.one(f"unknown key; expected one of: {', '.join(sorted(self.used))}",
                                 path=self.at(unknown[0]))


_REQUIRED = object()


def _int_at_least(n: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= n


def _positive_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and math.isfinite(v)


def _one_of(options: tuple[str, ...]) -> Callable[[Any], bool]:
    return lambda v: v in options


def _schedule(data: Any) -> ScheduleConfig:
    r = _Reader(data if data is not None else {}, "schedule")
    d = ScheduleConfig()
    cfg = ScheduleConfig(
        kind=r.get("kind", d.kind, _one_of(SCHEDULE_KINDS), f"one of {', '.join(SCHEDULE_KINDS)}"),
        iter_limit=r.get("iter_limit", d.iter_limit, _int_at_least(0), "an int ≥ 0"),
        node_limit=r.get("node_limit", d.node_limit, _int_at_least(1), "an int ≥ 1"),
        time_limit_s=float(r.get("time_limit_s", d.time_limit_s, _positive_number, "a number > 0")),
        memory_limit_mb=r.get("memory_limit_mb", d.memory_limit_mb, lambda v: v is None or _int_at_least(64)(v),
                              "an int ≥ 64 (MiB) or null"),
        k_multi=r.get("k_multi", d.k_multi, _int_at_least(0), "an int ≥ 0"),
        class_counts=r.get("class_counts", d.class_counts, lambda v: isinstance(v, bool), "true or false"),
        cycle_filter=r.get("cycle_filter", d.cycle_filter, _one_of(CYCLE_FILTERS),
                           f"one of {', '.join(CYCLE_FILTERS)}"),
        epochs=r.get("epochs", d.epochs, _int_at_least(1), "an int ≥ 1"),
        explore_iter=r.get("explore_iter", d.explore_iter, _int_at_least(0), "an int ≥ 0"),
        epoch_extract=r.get("epoch_extract", d.epoch_extract, _one_of(("cpsat", "greedy-dag")),
                            "cpsat or greedy-dag"),
        epoch_time_limit_s=float(r.get("epoch_time_limit_s", d.epoch_time_limit_s, _positive_number,
                                       "a number > 0")),
        rules=_tuple_or_none(r.get("rules", None, lambda v: v is None or (
            isinstance(v, list) and v and all(isinstance(x, str) for x in v)), "a list of rule names")),
    )
    r.finish()
    if cfg.kind != "pulsed" and (given := [k for k in PULSED_KEYS if k in r.data]):
        raise EqdslError.one(f"`{given[0]}` applies to `kind: pulsed` only; got kind {cfg.kind!r}",
                             path=f"schedule.{given[0]}")
    return cfg


def _tuple_or_none(value: list[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _extract(data: Any) -> ExtractConfig:
    r = _Reader(data if data is not None else {}, "extract")
    d = ExtractConfig()
    is_list = lambda v: isinstance(v, list) and all(x in EXTRACTORS for x in v)  # noqa: E731
    cfg = ExtractConfig(
        method=r.get("method", d.method, _one_of(EXTRACTORS), f"one of {', '.join(EXTRACTORS)}"),
        time_limit_s=float(r.get("time_limit_s", d.time_limit_s, _positive_number, "a number > 0")),
        acyclic=r.get("acyclic", d.acyclic, _one_of(ACYCLIC), f"one of {', '.join(ACYCLIC)}"),
        warm_start=r.get("warm_start", d.warm_start, lambda v: v is None or v in ("greedy", "greedy-dag"),
                         "greedy, greedy-dag or null"),
        compare=tuple(r.get("compare", list(d.compare), is_list,
                            f"a list of extractors from {', '.join(EXTRACTORS)}")),
        workers=r.get("workers", d.workers, _int_at_least(1), "an int ≥ 1"),
    )
    r.finish()
    return cfg


def _program(data: Any, base: Path) -> ProgramRef:
    if isinstance(data, str):
        return ProgramRef(base / data, None, None)
    if isinstance(data, dict) and "builder" in data:
        builder = data["builder"]
        if not isinstance(builder, str):
            raise _fail("program.builder", "a model name", builder)
        params = tuple((str(k), v) for k, v in data.items() if k != "builder")
        return ProgramRef(None, None, None, builder, params)
    r = _Reader(data, "program")
    is_str = lambda v: isinstance(v, str) and v != ""  # noqa: E731
    file = r.get("file", None, is_str, "a path to a .eqr file holding `program` blocks")
    name = r.get("name", None, is_str, "the name of a program")
    text = r.get("text", None, is_str, "`program` blocks in .eqr syntax")
    r.finish()
    if file and text:
        raise EqdslError.one("give either `file` or `text`, not both", path="program")
    return ProgramRef(base / file if file else None, name, text)


def parse_config(data: Any, source: Path) -> RunConfig:
    base = source.parent
    r = _Reader(data, "")
    is_str = lambda v: isinstance(v, str) and v != ""  # noqa: E731
    ruleset = r.get("ruleset", _REQUIRED, is_str, "a shipped ruleset name or a path to a .eqr file")
    program = _program(r.get("program", {}, lambda v: isinstance(v, (str, dict)),
                             "a path or a mapping with file/name/text"), base)
    schedule = _schedule(r.get("schedule", None, lambda v: v is None or isinstance(v, dict), "a mapping"))
    extract = _extract(r.get("extract", None, lambda v: v is None or isinstance(v, dict), "a mapping"))
    output = r.get("output", f"results/{source.stem}", is_str, "an output folder path")
    target = r.get("target", None, lambda v: v is None or is_str(v), "a target name or a .yaml path")
    validate = _validate(r.get("validate", False, lambda v: isinstance(v, (bool, dict)),
                               "true/false or a mapping with samples/seed"))
    r.finish()
    return RunConfig(source, ruleset, program, schedule, extract, Path(output), data, target, validate)


def _validate(data: bool | dict) -> ValidateConfig | None:
    if data is False:
        return None
    if data is True:
        return ValidateConfig()
    r = _Reader(data, "validate")
    samples = r.get("samples", ValidateConfig.samples, _int_at_least(1), "an integer >= 1")
    seed = r.get("seed", ValidateConfig.seed, _int_at_least(0), "an integer >= 0")
    r.finish()
    return ValidateConfig(samples, seed)


def load_config(path: Path) -> RunConfig:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise EqdslError.one(f"cannot read config {path}: {err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(err, "problem", None) or str(err)
        raise EqdslError.one(f"{where}: invalid YAML: {problem}") from None
    try:
        return parse_config(data, path)
    except EqdslError as err:
        raise EqdslError([replace(d, path=f"{path}: {d.path}") if d.path else d
                          for d in err.diagnostics]) from None
