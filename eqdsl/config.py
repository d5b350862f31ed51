"""YAML run configuration → frozen dataclasses, validated with errors that name the YAML path.

Contract: `load_config(path)` returns a `RunConfig` or raises `EqdslError` whose diagnostic names
the path of the bad key (`schedule.k_multi: expected an int ≥ 0, got 'one'`). Unknown keys are
errors. Relative file paths are resolved against the config file's folder. Each section's keys come
from its registry (schedule kinds, extractors, program sources).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Callable, TypeVar

from eqdsl.cost.registry import TargetConfig, read_target
from eqdsl.diagnostics import EqdslError
from eqdsl.execute.executor import ExecuteSettings, read_execute
from eqdsl.exports.base import ExportSettings
from eqdsl.exports.registry import read_export
from eqdsl.extract.registry import ExtractConfig, read_extract
from eqdsl.fields import REQUIRED, Reader, int_at_least, load_yaml, option, read_section
from eqdsl.schedule.registry import read_schedule
from eqdsl.schedule.runner import LimitsConfig
from eqdsl.sources.base import ProgramRef
from eqdsl.sources.registry import read_program

T = TypeVar("T")


@dataclass(frozen=True)
class RunConfig:
    source: Path
    ruleset: str
    program: ProgramRef
    schedule: LimitsConfig  # the kind's own config class (eqdsl.schedule.registry)
    extract: ExtractConfig
    output: Path
    raw: dict
    target: TargetConfig | None = None  # a target kind (eqdsl.cost.registry): a roofline file, or measuring
    validate: ValidateConfig | None = None  # translation validation after extraction (off: None)
    export: ExportSettings | None = None  # the optimized program in another format (eqdsl.exports)
    export_given: bool = False  # `export:` appeared (false or not): a source's default export does not apply
    execute: ExecuteSettings | None = None  # run input and optimized programs with eqdsl's kernels
    he: HeConfig | None = None  # run the optimized program under homomorphic encryption (a source's runner)
    report_html: bool = False  # `report: html`: also report.html (eqdsl.report_page) in the output folder


def effective(config: RunConfig) -> dict[str, Any]:
    """The configuration that ran, as JSON: every section with its defaults filled in and the
    command's flags applied (`report.json` keeps the YAML as read beside it)."""
    sections = {f.name: getattr(config, f.name) for f in fields(config) if f.name not in ("raw", "source")}
    sections["schedule"] = {"kind": getattr(config.schedule, "kind", None), **_plain(config.schedule)}
    sections["program"] = {"source": config.program.source, **_plain(dict(config.program.params))}
    return {name: _plain(value) for name, value in sections.items()}


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return getattr(value, "__name__", None) or repr(value)  # a warm start's function, a callable


@dataclass(frozen=True)
class HeConfig:
    """`he: true` or `{batch: 8, seed: 0}`: the optimized program as a TenSEAL BFV circuit on a
    batch of random inputs (sources that have an HE runner: Q-gym's conv_layer)."""

    batch: int = option(8, int_at_least(1), "an integer >= 1")
    seed: int = option(0, int_at_least(0), "an integer >= 0")


@dataclass(frozen=True)
class ValidateConfig:
    """Run the input and the extracted program on the same random inputs (eqdsl.verify.validate)."""

    samples: int = option(3, int_at_least(1), "an integer >= 1")
    seed: int = option(0, int_at_least(0), "an integer >= 0")
    run_ref: bool = True  # load a user ruleset's `_ref.py` (Python); `--no-ref` turns it off


def _with_key(data: Any, keys: list[str], value: Any, whole: str) -> Any:
    """`data` with the nested key set to `value` (mappings made where missing)."""
    if not keys[0]:
        raise EqdslError.one(f"--set {whole}: expected a dotted key such as schedule.iter_limit")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise EqdslError.one(f"--set {whole}: `{keys[0]}` is inside a value that is not a mapping")
    data = dict(data)
    data[keys[0]] = value if len(keys) == 1 else _with_key(data.get(keys[0]), keys[1:], value, whole)
    return data


def parse_config(data: Any, source: Path) -> RunConfig:
    """Every section is read even when an earlier one is bad: all their errors are reported."""
    base = source.parent
    r = Reader(data, "")
    problems: list = []

    def read(section: Callable[[], T]) -> T:
        try:
            return section()
        except EqdslError as err:
            problems.extend(err.diagnostics)
            return None  # type: ignore[return-value]  # never used: the errors are raised below

    is_str = lambda v: isinstance(v, str) and v != ""  # noqa: E731
    ruleset = read(lambda: r.get("ruleset", REQUIRED, is_str, "a shipped ruleset name or a path to a .eqr file"))
    program = read(lambda: read_program(r.get("program", {}, lambda v: isinstance(v, (str, dict)),
                                              "a path or a mapping with file/name/text"), base))
    schedule = read(lambda: read_schedule(r.get("schedule", None, lambda v: v is None or isinstance(v, dict),
                                                "a mapping")))
    extract = read(lambda: read_extract(r.get("extract", None, lambda v: v is None or isinstance(v, dict),
                                              "a mapping")))
    # named in the file: relative to the file, as every path a config names; the default: to the
    # current directory
    named_output = read(lambda: r.get("output", None, lambda v: is_str(v), "an output folder path"))
    output = base / named_output if named_output is not None else Path(f"results/{source.stem}")
    target = read(lambda: read_target(r.get("target", None, lambda v: v is None or is_str(v) or isinstance(v, dict),
                                            "a target name, a .yaml path, or {measure: ort|cpu|cuda, fallback: ...}"),
                                      base))
    validate = read(lambda: read_section(r.get("validate", False, lambda v: True, ""), ValidateConfig, "validate"))
    export_given = isinstance(data, dict) and "export" in data
    export = read(lambda: read_export(r.get("export", None, lambda v: True, "")))
    execute = read(lambda: read_execute(r.get("execute", None, lambda v: True, "")))
    he = read(lambda: read_section(r.get("he", False, lambda v: True, ""), HeConfig, "he"))
    report = read(lambda: r.get("report", "json", lambda v: v in ("json", "html"), "json or html"))
    read(r.finish)
    if problems:
        raise EqdslError(problems)
    return RunConfig(source, ruleset, program, schedule, extract, output, data, target, validate, export,
                     export_given, execute, he, report == "html")


def load_config(path: Path, overrides: tuple[tuple[str, Any], ...] = ()) -> RunConfig:
    """The config at `path`, with `overrides` ((`schedule.iter_limit`, 5), ...: `--set`) applied to
    its YAML before it is read, so they are checked as the file's own keys are."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise EqdslError.one(f"cannot read config {path}: {err}") from None
    data = load_yaml(text, str(path))
    for key, value in overrides:
        data = _with_key(data, key.split("."), value, key)
    try:
        return parse_config(data, path)
    except EqdslError as err:
        raise EqdslError([replace(d, path=f"{path}: {d.path}") if d.path else d
                          for d in err.diagnostics]) from None
