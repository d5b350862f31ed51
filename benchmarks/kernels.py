"""eqdsl's kernels beside the vendor library's, in one run: Numba CUDA vs PyTorch (cuBLAS / cuDNN)
on the GPU (default), or with --device cpu Numba CPU vs ONNX Runtime (MLAS) on the same threads.

Shapes are TENSAT's models' (ResNet-50, VGG-19, BERT layers, batch 1). Each time is the median of
`--runs` launches timed with CUDA events after warm-up; inputs are on the device; both sides FP32
(TF32 off). A launch from Python includes Numba's dispatch: the empty-kernel row is that floor. Prints a
Markdown table (ms, GFLOP/s for ours, torch / ours) and, with --json, writes the rows.
On the CPU the convolutions are also timed on the direct loop nest (the kernel before im2col+GEMM).
Usage: python benchmarks/kernels.py [--device cuda|cpu] [--runs 20] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


# (name, op, args in the reference's order, flops)
CASES = [
    ("resnet50 conv3x3 64→64 @56", "conv2d", (1, 1, 0, 2, (1, 64, 56, 56), (64, 64, 3, 3)), 2 * 64 * 56 * 56 * 64 * 9),
    ("resnet50 conv1x1 256→64 @56", "conv2d", (1, 1, 0, 2, (1, 256, 56, 56), (64, 256, 1, 1)), 2 * 64 * 56 * 56 * 256),
    ("vgg19 conv3x3 128→128 @112", "conv2d", (1, 1, 0, 2, (1, 128, 112, 112), (128, 128, 3, 3)),
     2 * 128 * 112 * 112 * 128 * 9),
    ("resnext50 gconv3x3 g32 128 @56", "conv2d", (1, 1, 0, 2, (1, 128, 56, 56), (128, 4, 3, 3)),
     2 * 128 * 56 * 56 * 4 * 9),
    ("bert matmul 64×1024×1024", "matmul", (0, (1, 64, 1024), (1, 1024, 1024)), 2 * 64 * 1024 * 1024),
    ("matmul 1024³", "matmul", (0, (1, 1024, 1024), (1, 1024, 1024)), 2 * 1024 ** 3),
    ("poolmax 3x3/2 64 @112", "poolmax", ((1, 64, 112, 112), 3, 3, 2, 2, 0, 0), 64 * 56 * 56 * 9),
    ("ewadd 256 @56", "ewadd", ((1, 256, 56, 56), (1, 256, 56, 56)), 256 * 56 * 56),
    ("ewadd bias 256 @56 (broadcast)", "ewadd", ((1, 256, 56, 56), (1, 256, 1, 1)), 256 * 56 * 56),
    ("bert transpose 64×16×64 → 16×64×64", "transpose", ((64, 16, 64), [1, 0, 2]), 64 * 16 * 64),
    ("concat 2× 128 @56", "concat", (1, (1, 128, 56, 56), (1, 128, 56, 56)), 256 * 56 * 56),
    ("relu 256 @56", "relu", ((1, 256, 56, 56),), 256 * 56 * 56),
    ("hardswish 256 @56 (pointwise from the table)", "hardswish", ((1, 256, 56, 56),), 4 * 256 * 56 * 56),
]


def materialise(args: tuple, rng: np.random.Generator) -> tuple:
    return tuple(rng.standard_normal(a).astype(np.float32) if isinstance(a, tuple) else a for a in args)


def torch_fn(op: str, args: tuple):
    import torch
    import torch.nn.functional as F

    dev = [torch.from_numpy(a).cuda() if isinstance(a, np.ndarray) else a for a in args]
    match op:
        case "conv2d":
            sh, sw, pad, act, x, w = dev
            groups = x.shape[1] // w.shape[1]
            return lambda: F.relu(F.conv2d(x, w, stride=(sh, sw), padding="same" if pad == 0 else 0, groups=groups))
        case "matmul":
            _, a, b = dev
            return lambda: torch.matmul(a, b)
        case "poolmax":
            x, kh, kw, sh, sw, _pad, _ = dev
            return lambda: F.max_pool2d(x, (kh, kw), (sh, sw), padding=1)
        case "ewadd":
            return lambda: dev[0] + dev[1]
        case "transpose":
            return lambda: dev[0].permute(*dev[1]).contiguous()
        case "concat":
            return lambda: torch.cat(dev[1:], dim=dev[0])
        case "relu":
            return lambda: F.relu(dev[0])
        case "hardswish":
            return lambda: F.hardswish(dev[0])
    raise ValueError(op)


def time_torch(fn, runs: int) -> float:
    import torch

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False  # FP32 against FP32: no tensor-core TF32 rounding
    torch.backends.cuda.matmul.allow_tf32 = False
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)
    return float(np.median(times))


def cpu_rows(runs: int) -> list[dict]:
    import numba

    from eqdsl.execute.backends import one_op_session
    from eqdsl.frontend import load_language
    from eqdsl.kernels import cpu
    from eqdsl.onnx.runtime import median_ms, random_feeds

    lang, threads = load_language("tensor"), numba.get_num_threads()
    print(f"CPU: {threads} threads on both sides")
    print("| case | eqdsl Numba CPU ms | GFLOP/s | direct loop ms | ONNX Runtime (MLAS) ms | ORT / eqdsl |")
    print("|---|---|---|---|---|---|")
    rng, rows = np.random.default_rng(0), []
    for name, op, shapes, flops in CASES:
        host = materialise(shapes, rng)
        t_ours = cpu.time_op(op, host, runs)
        t_direct = _direct_conv_time(cpu, host, runs) if op == "conv2d" else None
        one = one_op_session(lang, op, shapes, threads)
        t_ort = median_ms([one], random_feeds(one, 0), runs)[0] / 1e3
        rows.append({"case": name, "op": op, "eqdsl_ms": t_ours * 1e3, "ort_ms": t_ort * 1e3,
                     "direct_ms": None if t_direct is None else t_direct * 1e3, "gflops": flops / t_ours / 1e9})
        direct = "" if t_direct is None else f"{t_direct * 1e3:.3f}"
        print(f"| {name} | {t_ours * 1e3:.3f} | {flops / t_ours / 1e9:.1f} | {direct} | {t_ort * 1e3:.3f} | "
              f"{t_ort / t_ours:.2f}× |", flush=True)
    return rows


def _direct_conv_time(cpu, host: tuple, runs: int) -> float:
    saved, cpu.GEMM_MIN_DEPTH = cpu.GEMM_MIN_DEPTH, 1 << 60
    try:
        return cpu.time_op("conv2d", host, runs)
    finally:
        cpu.GEMM_MIN_DEPTH = saved


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--json")
    args = p.parse_args()
    rows = cpu_rows(args.runs) if args.device == "cpu" else cuda_rows(args.runs)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


def cuda_rows(runs: int) -> list[dict]:
    from numba import cuda

    from eqdsl.kernels import cuda as ours

    name = cuda.get_current_device().name
    print(f"device: {name.decode() if isinstance(name, bytes) else name}")
    print("| case | eqdsl Numba CUDA ms | GFLOP/s | PyTorch (cuBLAS/cuDNN) ms | PyTorch / eqdsl |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    rows = []
    floor = ours.time_empty_launch(runs)
    print(f"| empty Numba kernel launch (floor) | {floor * 1e3:.3f} | | | |")
    for name, op, shapes, flops in CASES:
        host = materialise(shapes, rng)
        t_ours = ours.time_op(op, ours.to_device(host), runs)
        t_torch = time_torch(torch_fn(op, host), runs)
        rows.append({"case": name, "op": op, "eqdsl_ms": t_ours * 1e3, "torch_ms": t_torch * 1e3,
                     "gflops": flops / t_ours / 1e9})
        print(f"| {name} | {t_ours * 1e3:.3f} | {flops / t_ours / 1e9:.0f} | {t_torch * 1e3:.3f} | "
              f"{t_torch / t_ours:.2f}× |", flush=True)
    return rows


if __name__ == "__main__":
    main()
