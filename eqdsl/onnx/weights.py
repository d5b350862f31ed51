"""Weight values for programs: a program names its weights (`weight("conv1.w", [64, 3, 7, 7])`);
the values live beside it.

Contract: `Weights` maps a weight id to a float32 array (an opaque operator's large non-float
constant, quantized weights, keeps its own type). `random_weights(program)` draws values
for every weight of a program, reproducibly from the id alone (so the input program and the
optimized one see the same numbers), scaled so deep models stay finite: He-style 1/√fan-in for
kernels and matrices, near-1 positive scales and variances for batch norms.
"""
from __future__ import annotations

import zlib

import numpy as np

from eqdsl import ir
from eqdsl.languages.tensor.ops import SPECS

Weights = dict[str, np.ndarray]

def weight_roles(program: ir.Program) -> dict[str, str]:
    """'positive' for weights an operator needs positive (`OpSpec.positive`: a batch norm's scale
    and variance), else 'plain'."""
    roles: dict[str, str] = {}
    for node in program.nodes:
        for position, a in enumerate(node.args):
            if not isinstance(a, ir.Child):
                continue
            child = program.nodes[a.index]
            if child.op == "weight":
                positive = node.op in SPECS and position in SPECS[node.op].positive
                roles[str(child.args[0])] = "positive" if positive else roles.get(str(child.args[0]), "plain")
    return roles


def random_weight(wid: str, dims: tuple[int, ...], role: str = "plain", seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng([seed, zlib.crc32(wid.encode())])
    if role == "positive":
        return rng.uniform(0.5, 1.5, dims).astype(np.float32)
    fan_in = int(np.prod(dims[1:])) if len(dims) == 4 else dims[0] if len(dims) == 2 else 100
    return (rng.standard_normal(dims, dtype=np.float32) / np.float32(np.sqrt(max(fan_in, 1))))


def random_weights(program: ir.Program, seed: int = 0) -> Weights:
    roles = weight_roles(program)
    out: Weights = {}
    for node in program.nodes:
        if node.op == "weight":
            wid, dims = str(node.args[0]), tuple(int(d) for d in node.args[1])  # type: ignore[union-attr]
            out[wid] = random_weight(wid, dims, roles.get(wid, "plain"), seed)
    return out
