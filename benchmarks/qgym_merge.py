"""Q-gym, issue 48 goal 2: can any program family we know beat the level-shifted SumMerge?

    .venv/bin/python benchmarks/qgym_merge.py [--rows all|1x1x32x32q2,...] [--families ties,c-local,...]
        [--tries 10] [--json out.json]

Per layer (synthetic weights, seed 0): FLOPs (adds + muls, Q-gym's unit) of the level-shifted
SumMerge (`summerge(..., shift=True)`, the 77.2 % start), and of each family below, counted the
way `count_ops` counts a built program (every distinct add and mul once):
- `ties`: the same merging with random tie-breaks (the window's activations relabelled at random,
  so SumMerge's smallest-pair tie-break falls differently), best of `--tries`;
- `c-local`: per kernel, every choice of the level whose group the shift drops (or none), kept
  where the merged program gets cheaper (one pass over the kernels);
- `products`: products taken inside shared partial sums — every (activation, coefficient) product
  computed once and shared by every kernel that has it, the kernels' sums of products merged
  (with and without the shift, the cheaper);
- `strips`: Lupanov's construction (the asymptotically optimal one for a fixed matrix times a
  vector) — kernels in strips of h, the activations of a strip summed per class of equal level
  h-tuples, every level group a sum of class sums, those sums merged across all kernels; the best
  of h in STRIP_HEIGHTS;
- `pilot`: the merge order searched — at every step each of the PILOT_BRANCH most frequent pairs is
  merged and the rest finished by SumMerge's greedy merging, and the best of them is kept (the
  pilot method; slow: meant for the small rows);
- `rectangles`: rectangle covering (logic synthesis' alternative to pair merging) — repeatedly
  the largest common part (≥ RECT_MIN activations or terms) of two groups becomes one term,
  replaced in every group that holds it whole; then SumMerge's pair merging;
- `nearest`: sums shared by difference (G = B + (G \\ B) − (B \\ G)) can only pay where another
  group B is close to G: the mean over groups of min |G Δ B| / |G| (≥ 100 %: never cheaper
  than summing G's own activations);
- `adds`: the points of the plain layer that the shifted program's group-sum adds make up — what
  a better merging could remove at most — and the share of them +3 points needs;
- `floor`: the family's floor: every kernel's products and their adds, one add per distinct group.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from itertools import combinations
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eqdsl.apps.qgym.layer import LayerSpec, QuantizedLayer, synthetic_weights, window_order  # noqa: E402
from eqdsl.apps.qgym.summerge import level_groups, merge_pairs, shift_level  # noqa: E402

SIX = "1x1x32x32q2,1x1x32x32q12,3x3x16x16q4,3x3x16x16q12,7x7x8x8q4,3x3x32x32q4"
GRID = [(1, 1, 32, 32), (3, 3, 16, 16), (3, 3, 32, 32), (3, 3, 64, 64), (5, 5, 16, 16), (7, 7, 8, 8)]
FAMILIES = ["ties", "c-local", "pilot", "products", "strips", "rectangles", "nearest", "adds", "floor"]
STRIP_HEIGHTS = (2, 3, 4, 6, 8)
RECT_MIN = 8
PILOT_BRANCH = 8

Groups = list[dict[int, set[int]]]  # per kernel: level → the window positions with that weight


def kernel_groups(layer: QuantizedLayer) -> Groups:
    window = window_order(layer.spec)
    return [level_groups(layer.weights[k], window, list(range(len(window)))) for k in range(layer.spec.K)]


def merged_adds(sets: list[set[int]], num_terms: int) -> int:
    merged = merge_pairs(sets, num_terms)
    return len(merged.merges) + sum(len(g) - 1 for g in merged.groups)


def kept_sets(groups: Groups, drops: list[int], n: int, whole: bool = True) -> list[set[int]]:
    """The groups SumMerge sums: every kernel's level groups but the dropped one, and (`whole`,
    where any kernel shifts) the window's T."""
    sets = [set(m) for k, g in enumerate(groups) for v, m in g.items() if v != drops[k]]
    return sets + ([set(range(n))] if whole and set(drops) - {0} else [])


def product_side(groups: Groups, drops: list[int]) -> int:
    """Every kernel's products (one per kept level group) and the adds that combine them, plus the
    distinct c · T products of the shifted kernels."""
    kept = [len(set(g) - {drops[k]}) for k, g in enumerate(groups)]
    combine = sum(n - 1 + (drops[k] != 0) for k, n in enumerate(kept))
    return sum(kept) + combine + len(set(drops) - {0})


def flops(groups: Groups, drops: list[int], n: int) -> int:
    """The shifted SumMerge family: kernel k drops the group of level drops[k] (0: no shift)."""
    return merged_adds(kept_sets(groups, drops, n), n) + product_side(groups, drops)


def products_flops(groups: Groups, drops: list[int], n: int) -> int:
    """Each kernel the sum of its (activation, w − c) products, every product computed once."""
    ids: dict[tuple, int] = {}
    sets = []
    for k, g in enumerate(groups):
        c = drops[k]
        terms = {ids.setdefault((i, v - c), len(ids)) for v, members in g.items() if v != c for i in members}
        sets.append(terms | ({ids.setdefault(("cT", c), len(ids))} if c else set()))
    shifted = set(drops) - {0}
    return merged_adds(sets, len(ids)) + len(ids) + (n - 1 if shifted else 0)


def strips_flops(groups: Groups, drops: list[int], n: int, h: int) -> int:
    """Lupanov's strips of h kernels: class sums per strip, level groups as sums of class sums."""
    levels = [{i: v for v, members in g.items() for i in members} for g in groups]
    class_adds, num_classes, sets = 0, 0, []
    whole: list[set[int]] = []
    for s0 in range(0, len(groups), h):
        strip = range(s0, min(s0 + h, len(groups)))
        classes: dict[tuple, set[int]] = {}
        for i in range(n):
            classes.setdefault(tuple(levels[k][i] for k in strip), set()).add(i)
        keys = list(classes)
        class_adds += sum(len(classes[key]) - 1 for key in keys)
        for pos, k in enumerate(strip):
            sets += [{num_classes + j for j, key in enumerate(keys) if key[pos] == v}
                     for v in groups[k] if v != drops[k]]
        if s0 == 0 and set(drops) - {0}:  # T: the first strip's class sums
            whole = [set(range(num_classes, num_classes + len(keys)))]
        num_classes += len(keys)
    return class_adds + merged_adds(sets + whole, num_classes) + product_side(groups, drops)


def rectangles_flops(groups: Groups, drops: list[int], n: int) -> int:
    sets = kept_sets(groups, drops, n)
    terms, adds = n, 0
    while True:
        member = np.zeros((len(sets), terms), dtype=np.int32)
        for i, g in enumerate(sets):
            member[i, list(g)] = 1
        common = member @ member.T
        np.fill_diagonal(common, 0)
        a, b = np.unravel_index(np.argmax(common), common.shape)
        if common[a, b] < RECT_MIN:
            return adds + merged_adds(sets, terms) + product_side(groups, drops)
        part = sets[a] & sets[b]
        for g in sets:
            if part <= g:
                g -= part
                g.add(terms)
        terms, adds = terms + 1, adds + len(part) - 1


def pilot_flops(groups: Groups, drops: list[int], n: int) -> int:
    sets = [frozenset(g) for g in kept_sets(groups, drops, n)]
    terms, done = n, 0
    while top := [pair for pair, count in _pair_counts(sets).most_common(PILOT_BRANCH) if count >= 2]:
        sets = _merge(sets, min(top, key=partial(_finished, sets, terms)), terms)
        terms, done = terms + 1, done + 1
    return done + sum(len(g) - 1 for g in sets) + product_side(groups, drops)


def _finished(sets: list[frozenset[int]], terms: int, pair: tuple[int, int]) -> int:
    """Adds of the greedy merging after `pair` is merged first."""
    return merged_adds([set(g) for g in _merge(sets, pair, terms)], terms + 1)


def _pair_counts(sets: list[frozenset[int]]) -> Counter:
    return Counter(pair for g in sets for pair in combinations(sorted(g), 2))


def _merge(sets: list[frozenset[int]], pair: tuple[int, int], term: int) -> list[frozenset[int]]:
    a, b = pair
    return [g - {a, b} | {term} if a in g and b in g else g for g in sets]


def ties_flops(groups: Groups, drops: list[int], n: int, tries: int) -> int:
    rng = np.random.default_rng(1)
    orders = [rng.permutation(n) for _ in range(tries)]
    return min(flops([{v: {int(perm[i]) for i in m} for v, m in g.items()} for g in groups], drops, n)
               for perm in orders)


def local_flops(groups: Groups, drops: list[int], n: int) -> int:
    best, current = flops(groups, drops, n), list(drops)
    for k, g in enumerate(groups):
        for v in [0, *sorted(g)]:
            trial = current[:k] + [v] + current[k + 1:]
            if v != current[k] and (cost := flops(groups, trial, n)) < best:
                best, current = cost, trial
    return best


def nearest_ratio(groups: Groups, drops: list[int], n: int) -> float:
    """Mean over the kept groups G of min over the other groups B of |G Δ B| / |G|."""
    member = np.array([[i in m for i in range(n)] for m in kept_sets(groups, drops, n, whole=False)],
                      dtype=np.int32)
    sizes = member.sum(axis=1)
    apart = sizes[:, None] + sizes[None, :] - 2 * (member @ member.T)
    np.fill_diagonal(apart, np.iinfo(np.int32).max)
    return float(np.mean(apart.min(axis=1) / sizes))


def group_adds(groups: Groups, drops: list[int], n: int) -> int:
    return flops(groups, drops, n) - product_side(groups, drops)


def floor(groups: Groups, drops: list[int], n: int) -> int:
    distinct = {frozenset(m) for m in kept_sets(groups, drops, n, whole=False) if len(m) >= 2}
    return product_side(groups, drops) + len(distinct) + 1


def family_costs(tries: int) -> dict[str, Callable[[Groups, list[int], int], float]]:
    return {"ties": lambda g, d, n: ties_flops(g, d, n, tries), "c-local": local_flops,
            "products": lambda g, d, n: min(products_flops(g, d, n), products_flops(g, [0] * len(g), n)),
            "strips": lambda g, d, n: min(strips_flops(g, d, n, h) for h in STRIP_HEIGHTS),
            "pilot": pilot_flops, "rectangles": rectangles_flops, "nearest": nearest_ratio, "adds": group_adds, "floor": floor}


def layer_row(spec: LayerSpec, families: list[str], tries: int) -> dict:
    groups = kernel_groups(QuantizedLayer(spec, synthetic_weights(spec, 0)))
    drops, n = [shift_level(g) for g in groups], spec.window
    row: dict = {"layer": [spec.R, spec.S, spec.C, spec.K], "Q": spec.Q, "plain": spec.plain_ops}
    t0 = time.perf_counter()
    row["shifted"] = flops(groups, drops, n)
    costs = family_costs(tries)
    for name in families:
        row[name] = costs[name](groups, drops, n)
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def _cell(row: dict, name: str) -> str:
    value, plain = row[name], row["plain"]
    if name == "nearest":
        return f"{100 * value:.0f} %"
    if name == "adds":
        points = 100 * value / plain
        return f"{points:.1f} pts (+3 = {300 / points:.0f} % of them)"
    return f"{value:,} ({100 * (1 - value / plain):.1f} %)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default=SIX, help="'all' (the 30-row grid) or RxSxCxKqQ,...")
    parser.add_argument("--families", default=",".join(FAMILIES), help=f"of {','.join(FAMILIES)}")
    parser.add_argument("--tries", type=int, default=10, help="random tie-break orders for 'ties'")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    families = [f for f in args.families.split(",") if f]
    if unknown := set(families) - set(FAMILIES):
        parser.error(f"unknown families {sorted(unknown)}; expected some of {','.join(FAMILIES)}")
    specs = ([LayerSpec(*dims, q) for dims in GRID for q in (2, 3, 4, 8, 12)] if args.rows == "all" else
             [_spec(r) for r in args.rows.split(",")])
    print("| layer (R,S,C,K) | Q | plain | shifted SumMerge | " + " | ".join(families) + " | s |")
    print("|---|---|---|---|" + "---|" * len(families) + "---|")
    rows = []
    for spec in specs:
        row = layer_row(spec, families, args.tries)
        rows.append(row)
        cells = " | ".join(_cell(row, name) for name in ["shifted", *families])
        print(f"| {tuple(row['layer'])} | {spec.Q} | {spec.plain_ops:,} | {cells} | {row['seconds']:.0f} |", flush=True)
    _averages(rows, families)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def _spec(row: str) -> LayerSpec:
    dims, q = row.split("q")
    r, s, c, k = (int(d) for d in dims.split("x"))
    return LayerSpec(r, s, c, k, int(q))


def _averages(rows: list[dict], families: list[str]) -> None:
    for name in ["shifted", *[f for f in families if f not in ("nearest", "adds")]]:
        mean = sum(100 * (1 - r[name] / r["plain"]) for r in rows) / len(rows)
        print(f"average FLOP reduction, {name}: {mean:.2f} %")
    if "adds" in families:
        print(f"average group-sum adds of the shifted program: {sum(100 * r['adds'] / r['plain'] for r in rows) / len(rows):.2f} points")


if __name__ == "__main__":
    main()
