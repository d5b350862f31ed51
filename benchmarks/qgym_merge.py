"""Q-gym, issue 48 goal 2: can the pair merging itself beat the level-shifted SumMerge?

    .venv/bin/python benchmarks/qgym_merge.py [--rows 1x1x32x32q2,3x3x16x16q4,...] [--tries 10]

Per layer (synthetic weights, seed 0): FLOPs (adds + muls, Q-gym's unit) of the level-shifted
SumMerge (`summerge(..., shift=True)`, the 77.2 % start), then of two searches over the same
program family, counted the way `count_ops` counts the built program:
- `ties`: the merging with random tie-breaks (the window's activations relabelled at random, so
  SumMerge's smallest-pair tie-break falls differently), best of `--tries`;
- `c-local`: per kernel, every choice of the level whose group the shift drops (or none), kept
  where the merged program gets cheaper (one pass over the kernels, SumMerge's merging each time);
and the floor of that family: every kernel still pays its Q − 1 products and their adds, and every
distinct group of two or more activations at least one add.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eqdsl.apps.qgym.layer import LayerSpec, QuantizedLayer, synthetic_weights, window_order  # noqa: E402
from eqdsl.apps.qgym.summerge import merge_pairs  # noqa: E402

ROWS = "1x1x32x32q2,1x1x32x32q12,3x3x16x16q4,3x3x16x16q12,7x7x8x8q4,3x3x32x32q4"


def kernel_levels(layer: QuantizedLayer) -> list[np.ndarray]:
    """Each kernel's weights over the window, in SumMerge's window order."""
    return [np.array([int(layer.weights[k][c, r, s]) for (r, s, c) in window_order(layer.spec)])
            for k in range(layer.spec.K)]


def flops(kernels: list[np.ndarray], drops: list[int]) -> int:
    """FLOPs of the merged program when kernel k drops the group of level drops[k] (0: no shift)."""
    n = len(kernels[0])
    groups = [set(np.nonzero(w == v)[0].tolist()) for k, w in enumerate(kernels) for v in np.unique(w) if v != drops[k]]
    shifted = {c for c in drops if c != 0}
    merged = merge_pairs(groups + ([set(range(n))] if shifted else []), n)
    adds = len(merged.merges) + sum(len(g) - 1 for g in merged.groups)
    products = sum(len(set(w.tolist()) - {drops[k]}) for k, w in enumerate(kernels))
    combine = sum(len(set(w.tolist()) - {drops[k]}) - 1 + (drops[k] != 0) for k, w in enumerate(kernels))
    return adds + combine + products + len(shifted)


def largest_level(w: np.ndarray) -> int:
    values, counts = np.unique(w, return_counts=True)
    return int(values[np.argmax(counts)])


def local_drops(kernels: list[np.ndarray], drops: list[int]) -> int:
    best, current = flops(kernels, drops), list(drops)
    for k, w in enumerate(kernels):
        for v in [0, *sorted(set(w.tolist()))]:
            trial = current[:k] + [v] + current[k + 1:]
            if v != current[k] and (cost := flops(kernels, trial)) < best:
                best, current = cost, trial
    return best


def floor(kernels: list[np.ndarray], drops: list[int]) -> int:
    groups = {frozenset(np.nonzero(w == v)[0].tolist()) for k, w in enumerate(kernels)
              for v in np.unique(w) if v != drops[k] and np.sum(w == v) >= 2}
    kept = sum(len(set(w.tolist()) - {drops[k]}) for k, w in enumerate(kernels))
    return 2 * kept + len(groups) + 1 + len(set(drops) - {0})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default=ROWS)
    parser.add_argument("--tries", type=int, default=10)
    args = parser.parse_args()
    print("| layer (R,S,C,K) | Q | plain | shifted SumMerge | ties, best of N | c-local | floor of the family | s |")
    print("|---|---|---|---|---|---|---|---|")
    for row in args.rows.split(","):
        dims, q = row.split("q")
        spec = LayerSpec(*map(int, dims.split("x")), int(q))
        kernels = kernel_levels(QuantizedLayer(spec, synthetic_weights(spec, 0)))
        drops = [largest_level(w) for w in kernels]
        t0 = time.perf_counter()
        rng = np.random.default_rng(1)
        base = flops(kernels, drops)
        ties = min(flops([w[perm] for w in kernels], drops)
                   for perm in (rng.permutation(spec.window) for _ in range(args.tries)))
        local = local_drops(kernels, drops)
        cells = " | ".join(_share(f, spec.plain_ops) for f in (base, ties, local, floor(kernels, drops)))
        print(f"| {(spec.R, spec.S, spec.C, spec.K)} | {spec.Q} | {spec.plain_ops:,} | {cells} | "
              f"{time.perf_counter() - t0:.0f} |", flush=True)


def _share(f: int, plain: int) -> str:
    return f"{f:,} ({100 * (1 - f / plain):.1f} %)"


if __name__ == "__main__":
    main()
