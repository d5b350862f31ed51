"""A quantized convolution layer and its expressions (Q-gym's layer → e-graph input).

Weights layout: an integer array [K, C, R, S] (output channel, input channel, kernel row, kernel
column) — ONNX's / PyTorch's OIHW — in a NumPy `.npy` file, or drawn by `synthetic_weights`.
Float files are accepted when every value is an integer. Zero weights are pruned (their products
vanish); every other value is one of at most Q distinct levels.

Expressions: output channel k at horizontal offset j (0 ≤ j ≤ tpr) is
    Σ_{c,r,s} W[k,c,r,s] · x(r, s + j, c)
one root per (j, k), roots ordered j-major. Each kernel's terms are grouped by weight value and
every group is summed along one fixed tree over the window (columns split first, so windows of
adjacent positions share whole column blocks; then rows·channels halved). The fixed order makes
identical partial sums of different kernels the same term, so hash-consing already shares them;
the rewrite rules then search for more. The plain layer's operation count K·(2·R·S·C − 1) does
not depend on this order.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.ir.builder import GraphBuilder, Tensor

LEVEL_RANGE = 127  # synthetic levels are distinct non-zero integers in [-127, 127] (int8)


@dataclass(frozen=True)
class LayerSpec:
    R: int
    S: int
    C: int
    K: int
    Q: int
    tpr: int = 0  # temporal reuse: t + 1 horizontally adjacent output positions together

    @property
    def window(self) -> int:
        return self.R * self.S * self.C

    @property
    def outputs(self) -> int:
        """Roots built together: K channels at each of tpr + 1 positions."""
        return (self.tpr + 1) * self.K

    @property
    def plain_ops(self) -> int:
        """Operations of the dense layer: RSC multiplies and RSC − 1 adds per output."""
        return self.outputs * (2 * self.window - 1)

    @property
    def plain_cost(self) -> int:
        """The same weighted by Q-gym's C_mul = 2, C_add = 1."""
        return self.outputs * (3 * self.window - 1)

    def name(self) -> str:
        return f"conv R{self.R} S{self.S} C{self.C} K{self.K} Q{self.Q} tpr{self.tpr}"


@dataclass(frozen=True)
class QuantizedLayer:
    spec: LayerSpec
    weights: np.ndarray  # int64 [K, C, R, S]

    @property
    def levels(self) -> tuple[int, ...]:
        return tuple(int(v) for v in np.unique(self.weights) if v != 0)


def synthetic_weights(spec: LayerSpec, seed: int) -> np.ndarray:
    """Q distinct non-zero integer levels, each weight one of them uniformly at random (Q-gym's
    Figure 5 setting)."""
    rng = np.random.default_rng(seed)
    pool = np.concatenate([np.arange(-LEVEL_RANGE, 0), np.arange(1, LEVEL_RANGE + 1)])
    if spec.Q > len(pool):
        raise EqdslError.one(f"expected Q ≤ {len(pool)} levels, got {spec.Q}", path="program.Q")
    levels = rng.choice(pool, size=spec.Q, replace=False)
    return levels[rng.integers(0, spec.Q, size=(spec.K, spec.C, spec.R, spec.S))].astype(np.int64)


def load_weights(path: Path, spec: LayerSpec) -> np.ndarray:
    """Read and check a weight file against the layer: shape [K, C, R, S], integral values, at
    most Q distinct non-zero levels."""
    try:
        raw = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise EqdslError.one(f"cannot read weight file {path}: expected a NumPy .npy array ({err})",
                             path="program.weights") from None
    expected = (spec.K, spec.C, spec.R, spec.S)
    if raw.shape != expected:
        raise EqdslError.one(f"weight file {path}: expected shape [K, C, R, S] = {list(expected)}, "
                             f"found {list(raw.shape)}", path="program.weights")
    if raw.dtype.kind not in "iuf" or (raw.dtype.kind == "f" and not np.all(np.isfinite(raw) & (raw == np.round(raw)))):
        raise EqdslError.one(f"weight file {path}: expected integer weights (quantized levels), "
                             f"found dtype {raw.dtype} with non-integral values", path="program.weights")
    weights = raw.astype(np.int64)
    check_levels(weights, spec.Q, f"weight file {path}")
    return weights


def check_levels(weights: np.ndarray, q: int, what: str) -> None:
    levels = np.unique(weights[weights != 0])
    if len(levels) > q:
        shown = ", ".join(str(int(v)) for v in levels[:16]) + (" …" if len(levels) > 16 else "")
        raise EqdslError.one(f"{what}: expected at most Q = {q} distinct non-zero weight values, "
                             f"found {len(levels)}: {shown}", path="program.Q")


def layer_expressions(lang: ir.Language, layer: QuantizedLayer) -> ir.Program:
    """The (tpr + 1)·K output expressions of the layer, as one multi-root program."""
    spec = layer.spec
    g = GraphBuilder(lang)
    roots: list[Tensor] = []
    for j in range(spec.tpr + 1):
        for k in range(spec.K):
            roots.append(_kernel_expression(g, layer.weights[k], j))
    return g.program(spec.name().replace(" ", "_"), roots)


def window_order(spec: LayerSpec) -> list[tuple[int, int, int]]:
    """The window's (r, s, c) in summation order: column-major blocks of rows × channels."""
    return [(r, s, c) for s in range(spec.S) for r in range(spec.R) for c in range(spec.C)]


def _kernel_expression(g: GraphBuilder, kernel: np.ndarray, offset: int) -> Tensor:
    """Σ W·x for one kernel [C, R, S] at horizontal offset `offset`, grouped by weight value."""
    C, R, S = kernel.shape
    block = R * C  # window index i = s·R·C + r·C + c (window_order)
    groups: dict[int, list[int]] = {}
    for i, v in enumerate(kernel.transpose(2, 1, 0).reshape(-1)):
        if v != 0:
            groups.setdefault(int(v), []).append(i)
    if not groups:  # an all-zero kernel: the output is 0·x
        return g.mul(g.w(0), g.x(0, offset, 0))

    def product(value: int):
        def term(i: int) -> Tensor:
            s, rc = divmod(i, block)
            r, c = divmod(rc, C)
            return g.mul(g.w(value), g.x(r, s + offset, c))
        return term

    return _balanced_sum(g, [_fixed_tree_sum(g, groups[v], 0, S * block, block, product(v))
                             for v in sorted(groups)])


def _fixed_tree_sum(g: GraphBuilder, members: list[int], lo: int, hi: int, block: int, term) -> Tensor:
    """Σ term(i) over `members` (sorted, all in [lo, hi)) along the fixed tree of [lo, hi): whole
    column blocks are halved first, then a block's indices."""
    if len(members) == 1:
        return term(members[0])
    size = hi - lo
    mid = lo + (size // block // 2) * block if size > block else lo + size // 2
    cut = bisect_left(members, mid)
    if cut == 0:
        return _fixed_tree_sum(g, members, mid, hi, block, term)
    if cut == len(members):
        return _fixed_tree_sum(g, members, lo, mid, block, term)
    return g.add(_fixed_tree_sum(g, members[:cut], lo, mid, block, term),
                 _fixed_tree_sum(g, members[cut:], mid, hi, block, term))


def _balanced_sum(g: GraphBuilder, terms: list[Tensor]) -> Tensor:
    while len(terms) > 1:
        terms = [g.add(terms[i], terms[i + 1]) if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


LAYER_PARAMS = {"R": 1, "S": 1, "C": 1, "K": 1, "Q": 1, "tpr": 0, "seed": 0}


# what the search starts from: the layer's sums, SumMerge's program, or SumMerge with the level
# shift (summerge.py) where that is cheaper
STARTS = ("layer", "summerge", "shifted")


def layer_start(params: dict) -> str:
    """What a `conv_layer` program's search starts from (its `start` param, checked)."""
    start = params.get("start", "layer")
    if start not in STARTS:
        raise EqdslError.one(f"expected one of {', '.join(STARTS)}, got {start!r}", path="program.start")
    return start


def layer_alternatives(params: dict, start: str) -> tuple[str, ...]:
    """The programs unioned with the start in the e-graph (`alternatives` param, checked; default:
    the greedy programs other than the start), so the search can only end at or below them."""
    default = [a for a in STARTS[1:] if a != start]
    chosen = params.get("alternatives", default)
    if not isinstance(chosen, list) or any(a not in STARTS for a in chosen):
        raise EqdslError.one(f"expected a list of {', '.join(STARTS)}, got {chosen!r}", path="program.alternatives")
    return tuple(dict.fromkeys(a for a in chosen if a != start))


def layer_from_params(params: dict, base: Path) -> QuantizedLayer:
    """The layer of a `conv_layer` program's params (`start` and `alternatives` are the search's,
    not the layer's)."""
    weights_file = params.get("weights")
    values = {}
    for key, value in params.items():
        if key in ("start", "alternatives"):
            continue
        if key == "weights":
            if not isinstance(value, str) or not value:
                raise EqdslError.one(f"expected a path to a .npy file, got {value!r}", path="program.weights")
            continue
        if key not in LAYER_PARAMS:
            known = ", ".join([*LAYER_PARAMS, "weights", "start", "alternatives"])
            raise EqdslError.one(f"unknown parameter for conv_layer; expected one of: {known}", path=f"program.{key}")
        least = LAYER_PARAMS[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise EqdslError.one(f"expected an int ≥ {least}, got {value!r}", path=f"program.{key}")
        values[key] = value
    missing = [k for k in ("R", "S", "C", "K", "Q") if k not in values]
    if missing:
        raise EqdslError.one(f"missing layer size {missing[0]}; conv_layer needs R, S, C, K and Q",
                             path=f"program.{missing[0]}")
    spec = LayerSpec(values["R"], values["S"], values["C"], values["K"], values["Q"], values.get("tpr", 0))
    if weights_file is not None:
        return QuantizedLayer(spec, load_weights(base / weights_file, spec))
    return QuantizedLayer(spec, synthetic_weights(spec, values.get("seed", 0)))
