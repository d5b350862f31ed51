"""Q-gym's generated CUDA kernels beside cuDNN's convolution (PyTorch), on the GPU, in one run.

Two steps, because the search needs egglog and CP-SAT (here) and the timing a GPU (the device
machine, where neither is installed):

    .venv/bin/python benchmarks/qgym_cuda.py prepare results/qgym_cuda.pkl       # search, pickle programs
    python3 benchmarks/qgym_cuda.py time results/qgym_cuda.pkl [--runs 30]        # on the GPU

`prepare` runs the Q-gym comparison (plain layer, SumMerge, SumMerge with the level shift, eqdsl's
pulsed search from the plain layer with both greedy programs unioned in: `pulsed-union`) on the
grid layers with Q ≤ 3 (or `--layers`) and pickles each layer's weights and programs with their
FLOP counts. `time` compiles each
program to `CudaConv`, checks it integer-exact against the direct convolution on the GPU, then
times it (median of `--runs` launches, CUDA events, `kernels.cuda.time_launch`) beside
`torch.nn.functional.conv2d` (cuDNN, FP32, TF32 off, cudnn.benchmark) on the same input
C × size × size, batch 1, valid padding. The empty-kernel launch is the floor under every launch
from Python.
"""
from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GRID = [(1, 1, 32, 32), (3, 3, 16, 16), (3, 3, 32, 32), (3, 3, 64, 64), (5, 5, 16, 16), (7, 7, 8, 8)]
QS = [2, 3]
METHODS = ["plain", "summerge", "shifted", "pulsed-union"]


def _name(spec) -> str:
    return f"{spec.R}x{spec.S}x{spec.C}x{spec.K}q{spec.Q}"


def prepare(path: Path, layers: str | None) -> None:
    from eqdsl.apps.qgym.baselines import count_ops
    from eqdsl.apps.qgym.layer import LayerSpec, QuantizedLayer, layer_expressions, synthetic_weights
    from eqdsl.apps.qgym.study import Search, compare
    from eqdsl.frontend import load_language
    from eqdsl.ir.builder import same_terms

    lang = load_language("qgym", Path("."))
    search = Search("pulsed-union", epochs=4, explore_iter=2, epoch_time_limit_s=4.0, alternatives=("summerge", "shifted"))
    cases = []
    for dims in GRID:
        for q in QS:
            spec = LayerSpec(*dims, q)
            if layers and _name(spec) not in layers.split(","):
                continue
            layer = QuantizedLayer(spec, synthetic_weights(spec, 0))
            t0 = time.perf_counter()
            res = compare(lang, layer, [search])
            programs = {"plain": layer_expressions(lang, layer), **res.programs}
            if same_terms(programs["pulsed-union"], programs["shifted"]):  # one program: compiled and timed once
                programs["pulsed-union"] = programs["shifted"]
            flops = {m: count_ops(p).ops for m, p in programs.items()}
            print(f"{dims} Q{q}: FLOPs " + ", ".join(f"{m} {flops[m]}" for m in METHODS)
                  + f" ({time.perf_counter() - t0:.1f} s)", flush=True)
            cases.append({"spec": spec, "weights": layer.weights, "programs": programs, "flops": flops})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(cases))


def _torch_ms(weights: np.ndarray, x: np.ndarray, runs: int) -> tuple[float, np.ndarray]:
    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    d_x = torch.from_numpy(x[None]).cuda()
    d_w = torch.from_numpy(weights.astype(np.float32)).cuda()
    for _ in range(5):
        out = F.conv2d(d_x, d_w)
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        F.conv2d(d_x, d_w)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times), out[0].cpu().numpy()


def time_all(path: Path, sizes: list[int], runs: int, channel_groups: list[int], methods: list[str],
             layers: str | None) -> None:
    from eqdsl.apps.qgym.kernels import cuda_kernel, direct_conv
    from eqdsl.kernels.cuda import time_empty_launch, time_launch

    print(f"empty Numba kernel launch (floor): {1e3 * time_empty_launch(runs):.4f} ms")
    print("| layer (R,S,C,K) | Q | input | FLOPs " + " / ".join(METHODS) + " | cuDNN ms | "
          + " | ".join(f"{m} ms" for m in methods) + f" | cuDNN / {methods[-1]} | compile s |")
    print("|---|---|---|---|---|" + "---|" * len(methods) + "---|---|")
    eqdsl = methods[-1]  # the ratio column: cuDNN against the last method named
    for case in pickle.loads(path.read_bytes()):
        spec, weights = case["spec"], case["weights"]
        if layers and _name(spec) not in layers.split(","):
            continue
        t0 = time.perf_counter()
        built: dict[tuple[int, int], object] = {}  # a program two methods name is compiled once
        kernels = {}
        for m in methods:
            for g in channel_groups:
                key = (id(case["programs"][m]), g)
                if key not in built:
                    built[key] = cuda_kernel(case["programs"][m], spec, min(g, spec.K))
                kernels[m, g] = built[key]
        compiled = False
        for size in sizes:
            x = np.random.default_rng(1).integers(-127, 128, size=(spec.C, size, size)).astype(np.float32)
            ref = direct_conv(x.astype(np.int64), weights)
            torch_ms, torch_out = _torch_ms(weights, x, runs)
            assert np.array_equal(torch_out.astype(np.int64), ref), "cuDNN disagrees with the direct convolution"
            for (m, g), kernel in kernels.items():  # the first call compiles
                print(f"# {spec} size {size}: {m} kernel, {g} channel group(s): {time.perf_counter() - t0:.1f} s",
                      file=sys.stderr, flush=True)
                assert np.array_equal(kernel(x).astype(np.int64), ref), "a Q-gym CUDA kernel is not exact"
            if not compiled:
                compile_s, compiled = time.perf_counter() - t0, True
            cells = {m: min(1e3 * time_launch(kernels[m, g].launch, (kernels[m, g].device_input(x),), runs)
                            for g in channel_groups) for m in methods}
            flops = " / ".join(str(case["flops"][m]) for m in METHODS)
            print(f"| {(spec.R, spec.S, spec.C, spec.K)} | {spec.Q} | {spec.C}×{size}×{size} | {flops} | {torch_ms:.4f} | "
                  + " | ".join(f"{cells[m]:.4f}" for m in methods)
                  + f" | {torch_ms / cells[eqdsl]:.2f}× | {compile_s:.1f} |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["prepare", "time"])
    ap.add_argument("file", type=Path)
    ap.add_argument("--sizes", default="64,256")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--methods", default=",".join(METHODS[1:]))
    ap.add_argument("--layers", help="e.g. 3x3x16x16q2,7x7x8x8q2 (default: every prepared layer)")
    ap.add_argument("--channel-groups", default="1,8", help="each kernel timed at each; the best is reported")
    args = ap.parse_args()
    if args.step == "prepare":
        prepare(args.file, args.layers)
    else:
        time_all(args.file, [int(s) for s in args.sizes.split(",")], args.runs,
                 [int(g) for g in args.channel_groups.split(",")], args.methods.split(","), args.layers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
