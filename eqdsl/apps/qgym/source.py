"""Q-gym's `conv_layer` program source (registered by entry point, `eqdsl.program_sources`).

`program: {builder: conv_layer, R, S, C, K, Q, tpr?, seed?, weights?, start?, alternatives?}` →
the layer's per-kernel sums (or, with `start: summerge` / `start: shifted`, SumMerge's program
without / with the level shift), with the other greedy programs (`alternatives`, default: SumMerge
and the shifted SumMerge) unioned with it in the e-graph, so the search ends at or below their cost;
plain, factorisation, SumMerge and SumMerge with the level shift as baselines; `execute:` runs the
optimized program as Q-gym's CPU/CUDA kernel beside ONNX Runtime's Conv, `he:` under TenSEAL
(`eqdsl.apps.qgym.runners`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eqdsl import ir
from eqdsl.apps.qgym.baselines import FLOPS, layer_counts, program_flops
from eqdsl.apps.qgym.layer import layer_alternatives, layer_from_params, layer_start
from eqdsl.apps.qgym.runners import HeRunner, KernelRunner
from eqdsl.apps.qgym.summerge import start_program, summerge
from eqdsl.sources.base import Baselines, ProgramRef, SourceProgram


@dataclass(frozen=True)
class ConvLayerSource:
    name: str = "conv_layer"
    builder: bool = True
    file_key: str | None = None

    def load(self, ref: ProgramRef, language: ir.Language) -> SourceProgram:
        params = dict(ref.params)
        start, layer = layer_start(params), layer_from_params(params, ref.base)
        merged = summerge(language, layer)  # SumMerge runs once: a start and a baseline
        shifted = start_program(language, layer, "shifted", merged)
        built = {"summerge": merged, "shifted": shifted}
        program = built[start] if start in built else start_program(language, layer, start)
        alternatives: list[ir.Program] = []
        for name in layer_alternatives(params, start):  # `shifted` is SumMerge's program when the shift gains nothing
            if all(built[name] is not p for p in (program, *alternatives)):
                alternatives.append(built[name])
        counts = layer_counts(layer, merged, shifted)
        # the run's DAG cost is the weighted one (add 1, mul 2, leaves 0): the costs' scale
        return SourceProgram(program, Baselines({m: c.cost for m, c in counts.items()}, "plain",
                                                "same layer, other methods (weighted cost 2·mul + add)",
                                                {FLOPS: {m: c.ops for m, c in counts.items()}}, program_flops),
                             alternatives=tuple(alternatives),
                             runners={"execution": KernelRunner(layer), "he": HeRunner(layer, merged)})

    def inputs(self, ref: ProgramRef) -> list[Path]:
        weights = ref.get("weights")
        return [ref.base / weights] if isinstance(weights, str) else []


CONV_LAYER = ConvLayerSource()
