"""A layer cut into tiles of input × output channels, each with its own program (register blocking).

One program for a whole large layer makes one loop body of ~10,000 statements whose live values
and input vectors outgrow the L1 cache: (3,3,64,64) Q3's kernel spilled ~900 vectors a position
group and ran at 0.42–0.60× ONNX Runtime. Cut into 4 tiles of 16 input channels, each tile's
SumMerge program reads 144 input vectors instead of 576 and its body keeps ~570 values live; the
four bodies together do 20 % more operations (sharing stops at tile edges, and the partial sums
are added up) and ran 2.4–2.7× faster (BENCHMARKS, "Kernels over channel tiles").

Contract: `tile_layer(lang, layer, c_block, k_block)` returns a `Tiling` whose tiles cover every
(output channel, input channel) pair of the layer exactly once; tile t's program computes, for
channels k0 .. k0 + K_t − 1, the sum over its input channels c0 .. c0 + C_t − 1 only (its own
sub-layer, `Tile.spec`). The layer's output is the sum of its tiles' outputs over the input
tiles of each output tile, which is what `kernels.tiled_cpu_kernel` computes. A block larger
than the layer falls back to the layer's size with a warning; never a partial cover.
"""
from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

from eqdsl import ir
from eqdsl.apps.qgym.baselines import OpCount, count_ops
from eqdsl.apps.qgym.layer import LayerSpec, QuantizedLayer
from eqdsl.apps.qgym.summerge import start_program

# Input vectors one tile's body may read (R·S·channels): a window small enough that the body's
# live values stay in cache, large enough that a tile's overhead is shared; 144–200 inputs were at
# or near the best on every layer tried (BENCHMARKS, "Kernels over channel tiles").
TILE_WINDOW = 200


@dataclass(frozen=True)
class Tile:
    k0: int  # first output channel
    c0: int  # first input channel
    spec: LayerSpec  # the sub-layer: K = its output channels, C = its input channels
    program: ir.Program


@dataclass(frozen=True)
class Tiling:
    spec: LayerSpec  # the whole layer
    tiles: tuple[Tile, ...]

    @classmethod
    def whole(cls, spec: LayerSpec, program: ir.Program) -> Tiling:
        return cls(spec, (Tile(0, 0, spec, program),))

    def input_tiles(self, k0: int) -> list[Tile]:
        """The tiles of output tile k0 in input-channel order (their partial sums add up)."""
        return sorted((t for t in self.tiles if t.k0 == k0), key=lambda t: t.c0)

    def count(self) -> OpCount:
        """What the tiled kernel computes: every tile's operations, plus one add per output and
        extra input tile to sum the partial outputs."""
        ops = [count_ops(t.program) for t in self.tiles]
        partial_sums = sum(t.spec.outputs for t in self.tiles) - self.spec.outputs
        return OpCount(sum(o.adds for o in ops) + partial_sums, sum(o.muls for o in ops))


def default_c_block(spec: LayerSpec) -> int:
    """The most input channels (C itself, or a power of two) whose window fits TILE_WINDOW,
    at least one."""
    if spec.window <= TILE_WINDOW:
        return spec.C
    block = 1
    while spec.R * spec.S * block * 2 <= TILE_WINDOW and block * 2 < spec.C:
        block *= 2
    return block


def tile_layer(lang: ir.Language, layer: QuantizedLayer, c_block: int | None = None,
               k_block: int | None = None, start: str = "shifted") -> Tiling:
    """The layer cut into tiles of `c_block` input × `k_block` output channels (None: all K,
    `default_c_block` C), each tile's program built by `start_program(start)` on its sub-layer;
    the last tile of a dimension may be smaller."""
    spec = layer.spec
    c_block = _block("c_block", default_c_block(spec) if c_block is None else c_block, spec.C)
    k_block = _block("k_block", spec.K if k_block is None else k_block, spec.K)
    tiles = []
    for k0 in range(0, spec.K, k_block):
        for c0 in range(0, spec.C, c_block):
            weights = layer.weights[k0:k0 + k_block, c0:c0 + c_block]
            sub = dataclasses.replace(spec, K=weights.shape[0], C=weights.shape[1])
            tiles.append(Tile(k0, c0, sub, start_program(lang, QuantizedLayer(sub, weights), start)))
    return Tiling(spec, tuple(tiles))


def _block(name: str, block: int, size: int) -> int:
    if block < 1:
        raise ValueError(f"{name} must be at least 1, got {block}")
    if block > size:
        warnings.warn(f"{name} {block} is larger than the layer's {size} channels: using {size}", stacklevel=3)
        return size
    return block
