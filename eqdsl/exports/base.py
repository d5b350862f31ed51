"""The interface every export implements.

Contract: `Export.run(job)` writes the optimized program (and, where the input was not a file of
that format, the input program) into `job.folder`, a private temporary folder, and returns an
`ExportOutcome`: the files it wrote (names relative to the folder, moved into the run's output
folder by the caller), a JSON-able report, summary lines, and `ok` (False when the exported model
disagrees with the input: the run then exits 1 and keeps both). User mistakes raise `EqdslError`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol

import numpy as np

from eqdsl import ir
from eqdsl.fields import int_at_least, is_bool, one_of, option
from eqdsl.onnx.runtime import PROVIDERS


@dataclass(frozen=True)
class ExportSettings:
    """`export: onnx` or `{format, runtime_check, runs, seed, keep_if_slower, device}` in a run config."""

    format: str = option("onnx", one_of(lambda: export_names()), lambda: f"one of: {', '.join(export_names())}")
    runtime_check: bool = option(True, is_bool, "true or false")
    runs: int = option(20, int_at_least(20), "an integer >= 20")
    seed: int = option(0, int_at_least(0), "an integer >= 0")
    # keep the optimized model even when measured slower than the input
    keep_if_slower: bool = option(False, is_bool, "true or false")
    # where the runtime check runs: "cpu", or "cuda" (ONNX Runtime's CUDA provider)
    device: str = option("cpu", one_of(tuple(PROVIDERS)), f"one of: {', '.join(PROVIDERS)}")
    # false: a rewrite the cost model predicts under 1 % faster than the input is not written or
    # timed, and your model is handed back (`eqdsl optimize`: seconds, not a timing of each)
    time_without_gain: bool = option(True, is_bool, "true or false")


def export_names() -> list[str]:
    from eqdsl.exports.registry import EXPORTS  # the registry imports this module

    return EXPORTS.names()


@dataclass(frozen=True)
class Candidate:
    """A program to measure beside the optimized one (`extract.candidates`)."""

    name: str  # its files' stem: `candidate-2`, …
    program: ir.Program
    predicted_speedup: float  # the cost model's input cost / its cost


@dataclass(frozen=True)
class ExportJob:
    language: ir.Language
    original: ir.Program
    optimized: ir.Program
    weights: Mapping[str, np.ndarray] | None  # None: the source has no values (random, seeded)
    source_file: Path | None  # the model file the program was read from, if any
    predicted_speedup: float  # the cost model's input cost / optimized cost
    folder: Path
    settings: ExportSettings
    fixed_inputs: Mapping[str, np.ndarray] = field(default_factory=dict)  # the source's inputs fixed to constants
    candidates: tuple[Candidate, ...] = ()  # measured beside `optimized`: the fastest is handed back


@dataclass
class ExportOutcome:
    files: list[str]
    report: dict[str, Any] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    ok: bool = True


class Export(Protocol):
    @property
    def name(self) -> str: ...

    def run(self, job: ExportJob) -> ExportOutcome: ...
