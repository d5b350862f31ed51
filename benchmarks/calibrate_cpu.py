"""Measure roofline parameters of ONNX Runtime (CPU) on this machine, for a cost-model target.

Usage: python benchmarks/calibrate_cpu.py [--threads 1] [--runs 30]
Prints a target file (targets/*.yaml format): `gflops` from a 1024×1024×1024 MatMul, `gbps` from
an Add over 2×16 Mi floats (3 × 64 MiB moved), `launch_ns` from a chain of 200 Relu nodes on 16
floats (per-node cost when the work is nil). Each is the median of `--runs` timed runs.
"""
from __future__ import annotations

import argparse
import platform

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from eqdsl.onnx.runtime import median_ms


def _session(nodes, inputs, output, threads):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep the relu chain
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n = 1024
    mm = _session([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", [n, n]), ("b", [n, n])], "y", args.threads)
    a = rng.standard_normal((n, n), dtype=np.float32)
    gflops = 2 * n ** 3 / (median_ms([mm], {"a": a, "b": a}, args.runs)[0] / 1e3) / 1e9
    m = 16 * 1024 * 1024
    add = _session([helper.make_node("Add", ["a", "b"], ["y"])], [("a", [m]), ("b", [m])], "y", args.threads)
    big = rng.standard_normal(m, dtype=np.float32)
    gbps = 3 * 4 * m / (median_ms([add], {"a": big, "b": big}, args.runs)[0] / 1e3) / 1e9
    chain = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(200)]
    relu = _session(chain, [("t0", [16])], "t200", args.threads)
    launch_ns = median_ms([relu], {"t0": np.ones(16, np.float32)}, args.runs)[0] * 1e6 / 200
    print(f"name: CPU (ONNX Runtime {ort.__version__}, {args.threads} thread(s))")
    print("description: >")
    print(f"  Measured on this machine ({platform.processor() or platform.machine()}) by")
    print(f"  benchmarks/calibrate_cpu.py --threads {args.threads}: MatMul 1024³ GFLOP/s, Add bandwidth,")
    print("  per-node overhead of a Relu chain; medians of timed runs under ONNX Runtime (CPU);")
    print("  split_copies: ONNX Runtime's Split writes its parts to new tensors.")
    print("params:")
    print(f"  gflops: {round(gflops)}")
    print(f"  gbps: {round(gbps)}")
    print(f"  launch_ns: {round(launch_ns)}")
    print("  split_copies: 1")


if __name__ == "__main__":
    main()
