"""ONNX models as program sources: `program: {onnx: model.onnx}` (`eqdsl.onnx.read`).

The program keeps the model's weights (exports use them) and the file (the runtime check compares
the optimized model with it); runs export ONNX unless the config says `export: false`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.sources.base import ProgramRef, SourceProgram


@dataclass(frozen=True)
class OnnxSource:
    name: str = "onnx"
    builder: bool = False
    file_key: str | None = "onnx"

    def load(self, ref: ProgramRef, language: ir.Language) -> SourceProgram:
        from eqdsl.onnx import require_onnx

        require_onnx()
        from eqdsl.onnx.read import read_onnx

        if "conv2d" not in language.ops:
            raise EqdslError.one(f"an ONNX model imports to the tensat language, not {language.name!r}",
                                 path="ruleset")
        path = ref.base / ref.get("file")
        imported = read_onnx(path, language)
        return SourceProgram(imported.program, weights=imported.weights, source_file=path, default_export="onnx")

    def inputs(self, ref: ProgramRef) -> list[Path]:
        return [ref.base / ref.get("file")]
