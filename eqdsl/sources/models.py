"""The TENSAT model builders as program sources: `program: {builder: resnet50, size: 224}`."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eqdsl import ir
from eqdsl.languages.tensat.models import MODELS, build_model
from eqdsl.sources.base import ProgramRef, SourceProgram


@dataclass(frozen=True)
class ModelSource:
    name: str
    builder: bool = True
    file_key: str | None = None

    def load(self, ref: ProgramRef, language: ir.Language) -> SourceProgram:
        return SourceProgram(build_model(language, self.name, **dict(ref.params)))

    def inputs(self, ref: ProgramRef) -> list[Path]:
        return []


MODEL_SOURCES = [ModelSource(name) for name in MODELS]
