"""Q-gym's `conv_layer` program source (registered by entry point, `eqdsl.program_sources`).

`program: {builder: conv_layer, R, S, C, K, Q, tpr?, seed?, weights?, start?}` → the layer's
per-kernel sums (or, with `start: summerge` / `start: shifted`, SumMerge's program without / with
the level shift, so the search, which keeps its best, ends at or below SumMerge's cost), with
plain, factorisation, SumMerge and SumMerge with the level shift as baselines.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eqdsl import ir
from eqdsl.apps.qgym.baselines import FLOPS, layer_counts, program_flops
from eqdsl.apps.qgym.layer import layer_from_params, layer_start
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
        counts = layer_counts(layer, merged, shifted)
        # the run's DAG cost is the weighted one (add 1, mul 2, leaves 0): the costs' scale
        return SourceProgram(program, Baselines({m: c.cost for m, c in counts.items()}, "plain",
                                                "same layer, other methods (weighted cost 2·mul + add)",
                                                {FLOPS: {m: c.ops for m, c in counts.items()}}, program_flops))

    def inputs(self, ref: ProgramRef) -> list[Path]:
        weights = ref.get("weights")
        return [ref.base / weights] if isinstance(weights, str) else []


CONV_LAYER = ConvLayerSource()
