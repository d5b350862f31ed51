"""The interface every program source implements.

Contract: `ProgramSource.load(ref, language)` returns the program to optimize (a checked
`ir.Program` of `language`) and, optionally, other methods' costs on the same input
(`Baselines`, printed beside the run's result); user mistakes raise `EqdslError` naming the
`program.<key>` path. `inputs(ref)` lists the files the source reads (an output folder must not
contain them).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

import numpy as np

from eqdsl import ir


@dataclass(frozen=True)
class ProgramRef:
    """A `program:` section: the source's name and its parameters, paths relative to `base`."""

    source: str
    params: tuple[tuple[str, Any], ...]
    base: Path  # the config file's folder

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.params).get(key, default)


@dataclass(frozen=True)
class Baselines:
    """Other methods' costs on the same input, on the run's cost scale, and optionally in other
    units (`units`: unit → method → value, e.g. Q-gym's FLOPs), with `measure` giving the same
    units for the run's own program, so every method is reported in every unit."""

    costs: dict[str, float]
    reference: str  # the method the others (and the run) are compared with
    title: str  # how the summary introduces them
    units: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    measure: Callable[[ir.Program], Mapping[str, float]] | None = None


@dataclass(frozen=True)
class RunnerOutcome:
    """What a source's runner found: `ok` False fails the run (exit 1); `report` is its report.json
    section; `lines` go into the summary."""

    ok: bool
    report: dict[str, Any]
    lines: tuple[str, ...]


class ProgramRunner(Protocol):
    """A source's own way to run its programs for a stage (`execute:`, `he:`) where eqdsl's tensor
    executor does not apply (Q-gym's convolution kernels). `check(settings)` raises `EqdslError`
    before the run optimizes anything if it cannot run here; `run(program, settings)` runs one."""

    def check(self, settings: Any) -> None: ...

    def run(self, program: ir.Program, settings: Any) -> RunnerOutcome: ...


@dataclass(frozen=True)
class SourceProgram:
    program: ir.Program
    baselines: Baselines | None = None
    weights: Mapping[str, np.ndarray] | None = None  # the weights' values, when the source has them
    source_file: Path | None = None  # the model file the program was read from (exports compare with it)
    default_export: str | None = None  # the export a run does unless its config says `export: false`
    notes: tuple[str, ...] = ()  # what reading the source changed (an ONNX opset conversion), said in the summary
    fixed_inputs: Mapping[str, np.ndarray] = field(default_factory=dict)  # model inputs fixed to constants
    # programs equal to `program` root by root (another method's result on the same input), unioned
    # with it in the e-graph: the search starts from all of them, so it can only improve on them
    alternatives: tuple[ir.Program, ...] = ()
    runners: Mapping[str, ProgramRunner] = field(default_factory=dict)  # stage key ("execution", "he") → runner


class ProgramSource(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def builder(self) -> bool:
        """Selected by `program: {builder: NAME, ...params}`."""
        ...

    @property
    def file_key(self) -> str | None:
        """Selected by `program: {<file_key>: PATH}` (e.g. `{onnx: model.onnx}`), if not None."""
        ...

    def load(self, ref: ProgramRef, language: ir.Language) -> SourceProgram: ...

    def inputs(self, ref: ProgramRef) -> list[Path]: ...
