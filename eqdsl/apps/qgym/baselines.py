"""Operation counts of a layer's expressions, and the per-kernel factorisation baseline (UCNN).

Contract: `count_ops(program)` counts the distinct `add` and `mul` nodes of a program DAG (each
shared node once — what a kernel computes) and prices them with Q-gym's C_add = 1, C_mul = 2;
`factorised_count(layer)` counts Σ_v v · (Σ of the activations the kernel multiplies by v) per
kernel, with no sharing across kernels.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eqdsl import ir
from eqdsl.apps.qgym.layer import LayerSpec, QuantizedLayer
from eqdsl.graphs import reach

C_ADD, C_MUL = 1, 2


@dataclass(frozen=True)
class OpCount:
    adds: int
    muls: int

    @property
    def ops(self) -> int:
        return self.adds + self.muls

    @property
    def cost(self) -> int:
        return C_ADD * self.adds + C_MUL * self.muls


def count_ops(program: ir.Program) -> OpCount:
    live = reachable_nodes(program)
    adds = sum(1 for i in live if program.nodes[i].op == "add")
    muls = sum(1 for i in live if program.nodes[i].op == "mul")
    return OpCount(adds, muls)


def reachable_nodes(program: ir.Program, roots: list[int] | None = None) -> set[int]:
    """Indices of the nodes the roots (default: all) depend on."""
    return reach(program.roots if roots is None else roots,
                 lambda i: [a.index for a in program.nodes[i].args if isinstance(a, ir.Child)])


def plain_count(spec: LayerSpec) -> OpCount:
    return OpCount(spec.outputs * (spec.window - 1), spec.outputs * spec.window)


def factorised_count(layer: QuantizedLayer) -> OpCount:
    """UCNN's count without building it: per kernel, (|G_v| − 1) adds per level group, one
    multiply per group, (groups − 1) adds to combine; times the positions built together."""
    adds = muls = 0
    for kernel in layer.weights:
        values = kernel[kernel != 0]
        groups = len(np.unique(values))
        adds += (len(values) - groups) + max(groups - 1, 0)
        muls += groups
    positions = layer.spec.tpr + 1
    return OpCount(adds * positions, muls * positions)


FLOPS = "FLOPs"  # Q-gym's metric (its footnote 1): adds + multiplies


def layer_counts(layer: QuantizedLayer, merged: ir.Program, shifted: ir.Program) -> dict[str, OpCount]:
    """Each baseline's operation count for a `conv_layer` program; `merged` is SumMerge's program,
    `shifted` the cheaper of it and its level-shifted version (summerge.start_program)."""
    return {"plain": plain_count(layer.spec), "factorisation": factorised_count(layer), "summerge": count_ops(merged),
            "summerge-shifted": count_ops(shifted)}


def program_flops(program: ir.Program) -> dict[str, float]:
    return {FLOPS: count_ops(program).ops}
