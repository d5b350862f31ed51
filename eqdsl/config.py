"""YAML run configuration → frozen dataclasses, validated with errors that name the YAML path.

Contract: `load_config(path, overrides, sections)` returns a `RunConfig` or raises `EqdslError`
whose diagnostic names the path of the bad key (`schedule.k_multi: expected an int ≥ 0, got
'one'`). Unknown keys are errors. Relative file paths are resolved against the config file's
folder. Each section's keys come from its registry (schedule kinds, extractors, program sources);
the sections of the stages after extraction are declared by the stages (`Section`; by default
those of `eqdsl.stages.stage_sections`, a layer above this one, loaded by name when a config is
first read, as a target kind's backend is) and their settings kept in `RunConfig.sections`. An
override edits the YAML before it is read (`--set`, and every command-line flag that changes a
setting), so it is checked as the file's own keys are.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

from eqdsl.cost.registry import TargetConfig, read_target
from eqdsl.diagnostics import EqdslError
from eqdsl.extract.registry import ExtractConfig, read_extract
from eqdsl.fields import REQUIRED, Reader, load_yaml, yaml_text
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
    sections: Mapping[str, Any] = field(default_factory=dict)  # a declared `Section`'s key → its settings (None: off)
    given: frozenset[str] = frozenset()  # the declared sections the YAML names (`export: false` among them)
    report_html: bool = False  # `report: html`: also report.html (eqdsl.report_page) in the output folder


@dataclass(frozen=True)
class Section:
    """A config section a stage declares: its YAML `key` and `read`, which turns the key's value
    (None where absent) into the stage's settings (None: the stage is off), raising `EqdslError`
    at the key's path."""

    key: str
    read: Callable[[Any], Any]


def effective(config: RunConfig) -> dict[str, Any]:
    """The configuration that ran, as JSON: every section with its defaults filled in and the
    command's flags applied (`report.json` keeps the YAML as read beside it)."""
    sections = {f.name: getattr(config, f.name) for f in fields(config)
                if f.name not in ("raw", "source", "sections", "given", "report_html")}
    sections.update(config.sections)
    sections["report_html"] = config.report_html
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


Override = tuple[str, Any]  # (dotted key, value); a callable value maps the key's current value (None: absent)


def _with_key(data: Any, keys: list[str], value: Any, whole: str) -> Any:
    """`data` with the nested key set to `value`, or to `value(current)` for a callable (mappings
    made where missing, and where a section is `true`: on, every key at its default)."""
    if not keys[0]:
        raise EqdslError.one(f"--set {whole}: expected a dotted key such as schedule.iter_limit")
    if data is None or data is True:
        data = {}
    if not isinstance(data, dict):
        outer = whole.removesuffix("." + ".".join(keys))
        raise EqdslError.one(f"--set {whole}: `{keys[0]}` is inside `{outer}`, which is {yaml_text(data)}, "
                             f"not a mapping; expected --set '{outer}={{{keys[0]}: ...}}' to replace it")
    data = dict(data)
    if len(keys) > 1:
        data[keys[0]] = _with_key(data.get(keys[0]), keys[1:], value, whole)
    else:
        data[keys[0]] = value(data.get(keys[0])) if callable(value) else value
    return data


STAGE_SECTIONS = "eqdsl.stages:stage_sections"  # where the stages' sections are declared


def parse_config(data: Any, source: Path, sections: Sequence[Section] | None = None) -> RunConfig:
    """Every section is read even when an earlier one is bad: all their errors are reported."""
    if sections is None:
        module, name = STAGE_SECTIONS.split(":")
        sections = getattr(importlib.import_module(module), name)()
    assert sections is not None
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
    settings = {s.key: read(_section_reader(s, r)) for s in sections}
    given = frozenset(s.key for s in sections if isinstance(data, dict) and s.key in data)
    report = read(lambda: r.get("report", "json", lambda v: v in ("json", "html"), "json or html"))
    read(r.finish)
    if problems:
        raise EqdslError(problems)
    return RunConfig(source, ruleset, program, schedule, extract, output, data, target, settings, given,
                     report == "html")


def _section_reader(section: Section, r: Reader) -> Callable[[], Any]:
    return lambda: section.read(r.get(section.key, None, lambda v: True, ""))


def load_config(path: Path, overrides: Sequence[Override] = (), sections: Sequence[Section] | None = None) -> RunConfig:
    """The config at `path`, with `overrides` ((`schedule.iter_limit`, 5), ...: `--set`, flags)
    applied to its YAML before it is read, so they are checked as the file's own keys are."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise EqdslError.one(f"cannot read config {path}: {err}") from None
    written = data = load_yaml(text, str(path))
    for key, value in overrides:
        data = _with_key(data, key.split("."), value, key)
    try:
        return replace(parse_config(data, path, sections), raw=written)  # `raw`: the file as it is
    except EqdslError as err:
        raise EqdslError([replace(d, path=f"{path}: {d.path}") if d.path else d
                          for d in err.diagnostics]) from None
