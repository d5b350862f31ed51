"""ONNX models as program sources: `program: {onnx: model.onnx, shapes: {INPUT: [dims]},
constants: {INPUT: value}}` (`eqdsl.onnx.read`; `shapes` fixes dynamic input dimensions,
`constants` fixes an input's value: silero-vad's int64 sample rate).

The program keeps the model's weights (exports use them) and the file (the runtime check compares
the optimized model with it); runs export ONNX unless the config says `export: false`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.sources.base import ProgramRef, SourceProgram


def is_shapes(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and _is_dims(v) for k, v in value.items())


def is_constants(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and _is_number(v) for k, v in value.items())


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) or (
        isinstance(v, list) and bool(v) and all(_is_number(x) for x in v))


def _is_dims(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in v)


@dataclass(frozen=True)
class OnnxSource:
    name: str = "onnx"
    builder: bool = False
    file_key: str | None = "onnx"
    file_options: dict = field(default_factory=lambda: {
        "shapes": (is_shapes, "a mapping of input name to a list of dimensions > 0, e.g. {x: [1, 3, 224, 224]}"),
        "constants": (is_constants, "a mapping of input name to a number (or list of them), e.g. {sr: 16000}")})

    def load(self, ref: ProgramRef, language: ir.Language) -> SourceProgram:
        from eqdsl.onnx import require_onnx

        require_onnx()
        from eqdsl.onnx.read import read_onnx

        if "conv2d" not in language.ops:
            raise EqdslError.one(f"an ONNX model imports to the tensat language, not {language.name!r}",
                                 path="ruleset")
        path = ref.base / ref.get("file")
        shapes = {name: tuple(dims) for name, dims in (ref.get("shapes") or {}).items()}
        imported = read_onnx(path, language, shapes, dict(ref.get("constants") or {}))
        return SourceProgram(imported.program, weights=imported.weights, source_file=path, default_export="onnx",
                             notes=imported.notes, fixed_inputs=imported.fixed)

    def inputs(self, ref: ProgramRef) -> list[Path]:
        return [ref.base / ref.get("file")]
