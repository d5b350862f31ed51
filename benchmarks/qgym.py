"""Q-gym benchmark: operation counts over the layer grid, tpr sweep, kernel timings, HE counts.

    .venv/bin/python benchmarks/qgym.py [--quick] [--part ops,tpr,tpr-shift,kernels,he,seeded] [--searches greedy,cpsat,pulsed|none]
        [--layers 3x3x64x64,...] [--kernels summerge,shifted,tiled] [--json out.json]

Every number is measured in this run, side by side. Reduction % = share of the plain layer's
weighted cost (C_mul = 2, C_add = 1) removed. Every program is checked integer-exact against the
plain layer (`exact`); kernels are checked against a direct NumPy convolution before timing.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eqdsl.apps.qgym import he  # noqa: E402
from eqdsl.apps.qgym.kernels import direct_conv, tiled_cpu_kernel  # noqa: E402
from eqdsl.apps.qgym.layer import LayerSpec, QuantizedLayer, synthetic_weights  # noqa: E402
from eqdsl.apps.qgym.ort import ort_conv  # noqa: E402
from eqdsl.apps.qgym.study import Search, compare  # noqa: E402
from eqdsl.apps.qgym.tiles import Tiling, tile_layer  # noqa: E402
from eqdsl.frontend import load_language  # noqa: E402

GRID = [(1, 1, 32, 32), (3, 3, 16, 16), (3, 3, 32, 32), (3, 3, 64, 64), (5, 5, 16, 16), (7, 7, 8, 8)]
QS = [2, 3, 4, 8, 12]
# explore_iter 2: a third iteration of the six rules grows these e-graphs 10× past any useful
# node limit and is rolled back, so it only costs time
SEARCHES = [Search("greedy", "greedy-dag", explore_iter=2), Search("cpsat", explore_iter=2, epoch_time_limit_s=4.0),
            Search("pulsed", epochs=4, explore_iter=2, epoch_time_limit_s=4.0),
            Search("pulsed-shifted", epochs=4, explore_iter=2, epoch_time_limit_s=4.0, start="shifted"),
            # from the plain layer, SumMerge's and the shifted program unioned with it (issue 48)
            Search("pulsed-union", epochs=4, explore_iter=2, epoch_time_limit_s=4.0,
                   alternatives=("summerge", "shifted"))]
BASELINES = ["plain", "factorisation", "summerge", "shifted"]  # "shifted": SumMerge with the level shift


def ops_part(lang, grid, qs, searches: list[Search], rows: list) -> None:
    methods = BASELINES + [s.name for s in searches]
    print("Each cell: weighted cost (% removed) / FLOPs (% removed)")
    print("| layer (R,S,C,K) | Q | " + " | ".join(methods) + " | exact | seconds (shifted/" + "/".join(s.name for s in searches)
          + ") | epochs (cost after each) |")
    print("|---|---|" + "---|" * len(methods) + "---|---|---|")
    for dims in grid:
        for q in qs:
            spec = LayerSpec(*dims, q)
            res = compare(lang, QuantizedLayer(spec, synthetic_weights(spec, 0)), searches)
            cells = [f"{res.methods[m].ops.cost} ({res.reduction(m):.1f} %) / {res.methods[m].ops.ops} "
                     f"({res.flop_reduction(m):.1f} %)" for m in methods]
            exact = all(r.exact for r in res.methods.values())
            secs = "/".join(f"{res.methods[m].seconds:.1f}" for m in methods[3:])
            epochs = "; ".join(f"{x.name}: {res.methods[x.name].notes}" for x in searches if x.epochs > 1)
            print(f"| {dims} | {q} | " + " | ".join(cells) + f" | {exact} | {secs} | {epochs} |", flush=True)
            rows.append({"layer": dims, "Q": q, "exact": exact,
                         **{m: {"cost": res.methods[m].ops.cost, "ops": res.methods[m].ops.ops,
                                "reduction_pct": round(res.reduction(m), 2),
                                "flop_reduction_pct": round(res.flop_reduction(m), 2),
                                "seconds": round(res.methods[m].seconds, 3)}
                            for m in methods}})
    summarize(rows, methods)


def summarize(rows: list, methods: list[str]) -> None:
    if not rows:
        return
    avg = {m: statistics.mean(r[m]["reduction_pct"] for r in rows) for m in methods}
    flops = {m: statistics.mean(r[m]["flop_reduction_pct"] for r in rows) for m in methods}
    print("\naverage reduction over the grid, weighted cost: " + ", ".join(f"{m} {v:.1f} %" for m, v in avg.items()))
    print("average reduction over the grid, FLOPs (Q-gym's unit): "
          + ", ".join(f"{m} {v:.1f} %" for m, v in flops.items()))
    for m in methods[3:]:
        below = [f"{r['layer']} Q{r['Q']}" for r in rows if r[m]["ops"] > r["summerge"]["ops"]]
        print(f"{m}: {flops[m] - flops['summerge']:+.1f} pp FLOPs vs SumMerge; rows with more FLOPs than SumMerge: "
              f"{len(below)} of {len(rows)}" + (f" ({', '.join(below)})" if below else ""))
    if "pulsed" not in methods:
        return
    print(f"eqdsl pulsed − SumMerge: {avg['pulsed'] - avg['summerge']:+.1f} pp weighted, "
          f"{flops['pulsed'] - flops['summerge']:+.1f} pp FLOPs; "
          f"pulsed vs single epoch (cpsat), large layers (RSC ≥ 288): " +
          ", ".join(f"{r['layer']} Q{r['Q']} {100 * (r['cpsat']['cost'] - r['pulsed']['cost']) / r['cpsat']['cost']:+.1f} %"
                    for r in rows if r["layer"][0] * r["layer"][1] * r["layer"][2] >= 288))


def tpr_part(lang, layers, q: int, rows: list) -> None:
    print("\n| layer | Q | tpr | positions | pulsed cost | cost / position | reduction % | vs tpr 0 | seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for dims in layers:
        base = None
        for t in range(4):
            spec = LayerSpec(*dims, q, t)
            weights = synthetic_weights(LayerSpec(*dims, q), 0)
            res = compare(lang, QuantizedLayer(spec, weights), [SEARCHES[2]])
            cost = res.methods["pulsed"].ops.cost
            per = cost / (t + 1)
            base = base or per
            print(f"| {dims} | {q} | {t} | {t + 1} | {cost} | {per:.1f} | {res.reduction('pulsed'):.1f} | "
                  f"{100 * (base - per) / base:+.1f} % | {res.methods['pulsed'].seconds:.1f} | exact={res.methods['pulsed'].exact}",
                  flush=True)
            rows.append({"layer": dims, "Q": q, "tpr": t, "cost": cost, "per_position": per,
                         "exact": res.methods["pulsed"].exact})


def tpr_shift_part(lang, layers, q: int, rows: list) -> None:
    """Temporal reuse for SumMerge and the shifted SumMerge (no search): FLOPs per output position."""
    print("\n| layer | Q | tpr | positions | SumMerge FLOPs / position | shifted FLOPs / position "
          "| shifted vs its tpr 0 | exact | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for dims in layers:
        base = None
        for t in range(4):
            layer = QuantizedLayer(LayerSpec(*dims, q, t), synthetic_weights(LayerSpec(*dims, q), 0))
            res = compare(lang, layer, [])
            merged, shifted = (res.methods[m].ops.ops / (t + 1) for m in ("summerge", "shifted"))
            base = base or shifted
            exact = res.methods["summerge"].exact and res.methods["shifted"].exact
            print(f"| {dims} | {q} | {t} | {t + 1} | {merged:.1f} | {shifted:.1f} | {100 * (base - shifted) / base:+.1f} % "
                  f"| {exact} | {res.methods['shifted'].seconds:.1f} |", flush=True)
            rows.append({"layer": dims, "Q": q, "tpr": t, "summerge": merged, "shifted": shifted, "exact": exact})


def seeded_part(lang, cases, rows: list) -> None:
    """pulsed started from SumMerge's program with and without the level shift (`start: summerge`,
    `start: shifted`) next to those programs; weighted costs."""
    print("\n| layer | Q | start | start's cost | pulsed from it | epochs | exact | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for dims, q in cases:
        spec = LayerSpec(*dims, q)
        for start in ("summerge", "shifted"):
            search = Search("seeded", epochs=4, explore_iter=2, epoch_time_limit_s=4.0, start=start)
            res = compare(lang, QuantizedLayer(spec, synthetic_weights(spec, 0)), [search])
            seeded, begin = res.methods["seeded"], res.methods[start]
            print(f"| {dims} | {q} | {start} | {begin.ops.cost} | {seeded.ops.cost} | {seeded.notes} | {seeded.exact} | "
                  f"{seeded.seconds:.1f} |", flush=True)
            rows.append({"layer": dims, "Q": q, "start": start, "start_cost": begin.ops.cost, "seeded": seeded.ops.cost})


def _time_alternating(fns: dict, x: np.ndarray, rounds: int = 10, repeat: int = 20) -> dict[str, float]:
    """Seconds per call of each function: blocks of `repeat` calls, the functions taking turns
    for `rounds` blocks (this VM is shared: a load burst hits every function alike), the median
    of the block medians. Blocks rather than single calls: ORT's thread pool spins after a run
    and would slow whichever kernel runs right after it. (A 20 ms pause after each block was
    tried and did not steady the small (1,1,32,32) kernels, which still flip between ~0.10 and
    ~0.25 ms from run to run on this 2-core VM.)"""
    blocks: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            fn(x)
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                fn(x)
                times.append(time.perf_counter() - t0)
            blocks[name].append(statistics.median(times))
    return {name: statistics.median(b) for name, b in blocks.items()}


KERNEL_CASES = [(dims, q) for dims in GRID for q in (2, 3)]
# Programs above this many nodes are not compiled: one loop body of ~11k statements takes LLVM
# more than 8 minutes (SumMerge's (3,3,64,64) programs: 11,753 and 14,645 nodes). The shifted
# (3,3,64,64) programs (6,683 and 10,283 nodes) fit.
KERNEL_NODE_LIMIT = 11000
# "tiled": the shifted program of each channel tile (`tiles.tile_layer`, default blocks), one
# kernel per tile; the same kernel as "shifted" where the default tiling is the whole layer.
KERNEL_PROGRAMS = ("summerge", "shifted", "tiled")


def _kernel_tilings(lang, layer, res, programs) -> dict[str, Tiling]:
    tilings = {m: Tiling.whole(layer.spec, res.programs[m]) for m in programs if m != "tiled"}
    if "tiled" in programs:
        tilings["tiled"] = tile_layer(lang, layer)
    return {m: t for m, t in tilings.items() if max(len(tile.program.nodes) for tile in t.tiles) <= KERNEL_NODE_LIMIT}


def kernels_part(lang, cases, size: int, rows: list, programs=KERNEL_PROGRAMS) -> None:
    """SumMerge's program, the level-shifted one (what `start: shifted` begins from; the pulsed
    search from it found nothing cheaper on the rows measured) and the shifted programs of the
    layer's channel tiles as CPU kernels beside ORT's Conv."""
    print("\n| layer | Q | input | " + " | ".join(f"{m} ms" for m in programs) + " | ORT Conv ms | "
          + " | ".join(f"ORT / {m}" for m in programs) + " | FLOPs " + " / ".join(programs)
          + " / plain | tiles | compile s (each) |")
    print("|---|---|---|" + "---|" * (2 * len(programs) + 4))
    for dims, q in cases:
        spec = LayerSpec(*dims, q)
        layer = QuantizedLayer(spec, synthetic_weights(spec, 0))
        res = compare(lang, layer, [])
        x = np.random.default_rng(1).integers(-127, 128, size=(spec.C, size, size)).astype(np.float32)
        ref = direct_conv(x.astype(np.int64), layer.weights)
        tilings = _kernel_tilings(lang, layer, res, programs)
        fns, compile_s = {}, {}
        for m, tiling in tilings.items():
            if m == "tiled" and len(tiling.tiles) == 1 and "shifted" in fns:
                continue  # the whole layer: the shifted kernel
            t0 = time.perf_counter()
            fns[m] = tiled_cpu_kernel(tiling)
            fns[m](x)  # compiled for this input size on the first call
            compile_s[m] = time.perf_counter() - t0
        fns["ort"] = ort_conv(layer.weights.astype(np.float32), threads=2)
        for name, fn in fns.items():
            assert np.array_equal(fn(x).astype(np.int64), ref), f"{name} kernel disagrees with the direct convolution"
        t = _time_alternating(fns, x)
        if "tiled" in tilings and "tiled" not in t and "shifted" in t:
            t["tiled"], compile_s["tiled"] = t["shifted"], compile_s["shifted"]
        ms = " | ".join(f"{1e3 * t[m]:.3f}" if m in t else "not compiled" for m in programs)
        ratio = " | ".join(f"{t['ort'] / t[m]:.2f}×" if m in t else "–" for m in programs)
        tiled = tilings.get("tiled")
        flops = " / ".join(str(tiled.count().ops) if m == "tiled" and tiled else str(res.methods[m].ops.ops)
                           for m in programs if m != "tiled" or tiled)
        blocks = f"{len(tiled.tiles)} × {tiled.tiles[0].spec.C} in-ch" if tiled else "–"
        compiled = " / ".join(f"{compile_s[m]:.1f}" if m in compile_s else "–" for m in programs)
        print(f"| {dims} | {q} | {spec.C}×{size}×{size} | {ms} | {1e3 * t['ort']:.3f} | {ratio} | {flops} / "
              f"{res.methods['plain'].ops.ops} | {blocks} | {compiled} |", flush=True)
        rows.append({"layer": dims, "Q": q, "size": size, **{k: v * 1e3 for k, v in t.items()},
                     "compile_s": compile_s, "tiles": len(tiled.tiles) if tiled else None})


CRYPTONETS = [("conv 5×5 s2, 5 maps, 29×29 → 13×13", (5, 5, 1, 5), 169),
              ("FC 845 → 100", (1, 1, 845, 100), 1), ("FC 100 → 10", (1, 1, 100, 10), 1)]


def he_part(lang, q: int, rows: list) -> None:
    print(f"\nHE operation counts, CryptoNets MNIST layers, weights quantized to Q = {q} (synthetic, seed 0):")
    print("| layer | dense pt×ct mul / ct+ct add / pt+ct add | SumMerge | shifted | eqdsl pulsed | eqdsl pulsed-union |"
          " union ≤ SumMerge | seconds (pulsed / union) |")
    print("|---|---|---|---|---|---|---|---|")
    searches = [Search("pulsed", "greedy-dag", epochs=3, explore_iter=2),
                Search("pulsed-union", "greedy-dag", epochs=3, explore_iter=2, alternatives=("summerge", "shifted"))]
    for name, dims, positions in CRYPTONETS:
        spec = LayerSpec(*dims, q)
        layer = QuantizedLayer(spec, synthetic_weights(spec, 0))
        res = compare(lang, layer, searches)
        counts = {"dense": he.dense_he_counts(spec, positions),
                  **{m: he.he_counts(res.programs[m], positions)
                     for m in ("summerge", "shifted", "pulsed", "pulsed-union")}}
        fmt = lambda c: f"{c.pt_ct_mul} / {c.ct_ct_add} / {c.pt_ct_add}"  # noqa: E731
        union, merged = counts["pulsed-union"], counts["summerge"]
        not_worse = union.pt_ct_mul <= merged.pt_ct_mul and union.ct_ct_add <= merged.ct_ct_add
        secs = f"{res.methods['pulsed'].seconds:.1f} / {res.methods['pulsed-union'].seconds:.1f}"
        print(f"| {name} | " + " | ".join(fmt(counts[m]) for m in counts) + f" | {not_worse} | {secs} |", flush=True)
        rows.append({"layer": name, **{k: vars(v) for k, v in counts.items()}, "union_not_worse": not_worse,
                     "exact": all(r.exact for r in res.methods.values())})
        if dims == (1, 1, 100, 10):
            ok, secs_bfv = he.run_bfv(res.programs["pulsed-union"], layer.weights)
            print(f"TenSEAL BFV run of {name} (eqdsl pulsed-union's program, batch 8): decrypted outputs equal "
                  f"the integer layer: {ok} ({secs_bfv:.2f} s)")
            rows.append({"bfv": name, "equal": ok, "seconds": secs_bfv})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="two small layers, Q ∈ {2, 4}")
    ap.add_argument("--part", default="ops,tpr,kernels,he,seeded")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--searches", default=",".join(s.name for s in SEARCHES),
                    help="eqdsl searches in the ops part (comma-separated; 'none': baselines and the level shift only)")
    ap.add_argument("--layers", help="only these grid layers in the ops and kernels parts, e.g. 3x3x64x64,1x1x32x32")
    ap.add_argument("--kernels", default=",".join(KERNEL_PROGRAMS), help="programs timed in the kernels part")
    args = ap.parse_args()
    lang = load_language("qgym", Path("."))
    parts = set(args.part.split(","))
    out: dict[str, list] = {"ops": [], "tpr": [], "tpr-shift": [], "kernels": [], "he": [], "seeded": []}
    grid, qs = (GRID[:2], [2, 4]) if args.quick else (GRID, QS)
    if args.layers:
        grid = [tuple(int(n) for n in layer.split("x")) for layer in args.layers.split(",")]
    if "ops" in parts:
        names = set(args.searches.split(","))
        ops_part(lang, grid, qs, [s for s in SEARCHES if s.name in names], out["ops"])
    if "tpr" in parts:
        tpr_part(lang, [(3, 3, 16, 16)] if args.quick else [(3, 3, 16, 16), (5, 5, 16, 16), (7, 7, 8, 8)], 4, out["tpr"])
    if "tpr-shift" in parts:
        tpr_shift_part(lang, [(3, 3, 16, 16)] if args.quick else [(3, 3, 16, 16), (5, 5, 16, 16), (7, 7, 8, 8)], 4,
                       out["tpr-shift"])
    if "kernels" in parts:
        cases = [((3, 3, 16, 16), 2)] if args.quick else [(dims, q) for dims, q in KERNEL_CASES if dims in grid]
        kernels_part(lang, cases, 32 if args.quick else 64, out["kernels"], args.kernels.split(","))
    if "he" in parts:
        he_part(lang, 4, out["he"])
    if "seeded" in parts:
        seeded_part(lang, [((1, 1, 32, 32), 4), ((3, 3, 16, 16), 2), ((3, 3, 16, 16), 8)], out["seeded"])
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
