"""The program sources by name, and the `program:` config section that selects one.

Contract: `SOURCES` maps a name to a `ProgramSource`; `read_program(data, base)` turns a
`program:` value into a `ProgramRef` (a path or `{file, name, text}`: the `eqr` source;
`{builder: NAME, ...params}`: the builder source NAME; `{KEY: PATH}`: the source whose `file_key`
is KEY, e.g. `{onnx: model.onnx}`) or raises `EqdslError` naming the path;
`load_source(ref, language)` and `source_inputs(ref)` dispatch to the source. Adding a source is
one module plus one `register_source` line, or an entry point in `eqdsl.program_sources`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.fields import Reader, fail
from eqdsl.registry import Registry
from eqdsl.sources.base import ProgramRef, ProgramSource, SourceProgram
from eqdsl.sources.eqr import EqrSource
from eqdsl.sources.models import MODEL_SOURCES
from eqdsl.sources.onnx import OnnxSource

SOURCES: Registry[ProgramSource] = Registry("program source", "eqdsl.program_sources")
register_source = SOURCES.register


def sources() -> Registry[ProgramSource]:
    return SOURCES


def builder_names() -> list[str]:
    return sorted(name for name, s in sources().items() if s.builder)


def _or_none(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def read_program(data: Any, base: Path) -> ProgramRef:
    if isinstance(data, str):
        return ProgramRef("eqr", (("file", data),), base)
    for source in sources().values():
        if isinstance(data, dict) and source.file_key is not None and source.file_key in data:
            r = Reader(data, "program")
            file = r.get(source.file_key, None, lambda v: isinstance(v, str) and v != "", "a file path")
            options = getattr(source, "file_options", {})  # (check, expected) per further key it takes
            given = tuple((key, r.get(key, None, _or_none(check), expected))
                          for key, (check, expected) in options.items())
            r.finish()
            return ProgramRef(source.name, (("file", file),) + tuple(g for g in given if g[1] is not None), base)
    if isinstance(data, dict) and "builder" in data:
        builder = data["builder"]
        if not isinstance(builder, str):
            raise fail("program.builder", "a model name", builder)
        if builder not in builder_names():
            raise EqdslError.one(f"unknown model {builder!r}; expected one of: {', '.join(builder_names())}",
                                 path="program.builder")
        return ProgramRef(builder, tuple((str(k), v) for k, v in data.items() if k != "builder"), base)
    r = Reader(data, "program")
    is_str = lambda v: isinstance(v, str) and v != ""  # noqa: E731
    file = r.get("file", None, is_str, "a path to a .eqr file holding `program` blocks")
    name = r.get("name", None, is_str, "the name of a program")
    text = r.get("text", None, is_str, "`program` blocks in .eqr syntax")
    r.finish()
    if file and text:
        raise EqdslError.one("give either `file` or `text`, not both", path="program")
    given = (("file", file), ("name", name), ("text", text))
    return ProgramRef("eqr", tuple((k, v) for k, v in given if v is not None), base)


def load_source(ref: ProgramRef, language: ir.Language) -> SourceProgram:
    return sources()[ref.source].load(ref, language)


def source_inputs(ref: ProgramRef) -> list[Path]:
    return sources()[ref.source].inputs(ref)


register_source(EqrSource())
register_source(OnnxSource())
for _model in MODEL_SOURCES:
    register_source(_model)
