"""Measure the cost-model parameters of ONNX Runtime (CPU) on this machine, for `targets/cpu.yaml`.

Usage: python benchmarks/calibrate_cpu.py [--threads 1] [--runs 30]
Prints the target's `params:` block, each value from wall-clock medians of `--runs` timed runs of
a small ONNX model under ONNX Runtime's default optimizations (its NCHWc layout included), as a
model's own operators run:
- `gflops`: a chain of 3×3 convolutions, 128 channels at 28×28 (dense convolutions, per FLOP);
- `dw_gflops`: chains of 3×3 depthwise convolutions (96 channels at 56×56, 256 at 28×28, 480 at
  14×14: MobileNet's), their mean;
- `gbps`: a batch-1 Gemm streaming its 1×9216×4096 weights (AlexNet's first: memory, past every cache);
- `cache_gbps`: a chain of Adds over 1 Mi floats (12 MiB moved each, under `cache_kb`);
- `act_ps`: ps per element of a HardSwish, a Sigmoid and a Tanh after a 1×1 Conv (64 channels,
  56×56), as ONNX Runtime runs them fused into it: the chain with them less the chain without,
  the mean of the three;
- `launch_ns`: a chain of 200 Relus over 16 floats (the per-node cost when the work is nil);
- `lrn_ns`: an LRN (size 5) over AlexNet's first, 1×96×55×55, per element.
A chain's per-node time is the difference of a long and a short chain over their node counts, so
the reorders ONNX Runtime adds at a chain's ends cancel. `cache_kb` is not measured: half the
development VM's 32 MiB L3 (`lscpu`).
"""
from __future__ import annotations

import argparse

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from eqdsl.onnx.runtime import median_ms

RNG = np.random.default_rng(0)


def _session(nodes, shape: list[int], output: str, threads: int, weights=(), plain=False) -> ort.InferenceSession:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
                              initializer=list(weights))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    if plain:  # keeps a chain of no-ops as it is
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _chains_ns(chains: list[tuple], shape: list[int], args, plain=False) -> list[float]:
    """Median ns of one run of each chain (nodes, output, weights) on one random input of `shape`,
    the sessions taking turns run by run."""
    sessions = [_session(nodes, shape, output, args.threads, weights, plain) for nodes, output, weights in chains]
    feed = {"t0": RNG.standard_normal(shape, dtype=np.float32)}
    return [ms * 1e6 for ms in median_ms(sessions, feed, args.runs)]


def _chain_ns(chain: tuple, shape: list[int], args, plain=False) -> float:
    return _chains_ns([chain], shape, args, plain)[0]


def _per_node_ns(make, shape: list[int], short: int, long: int, args) -> float:
    """Per-node ns of a chain `make(n)` of `n` nodes: a long one minus a short one."""
    few, many = _chains_ns([make(short), make(long)], shape, args)
    return (many - few) / (long - short)


def _chain(op: str, n: int, inputs=(), weights=(), **attrs):
    nodes = [helper.make_node(op, [f"t{i}", *inputs], [f"t{i + 1}"], **attrs) for i in range(n)]
    return nodes, f"t{n}", weights


def _conv_chain(channels: int, group: int, kernel: int = 3, activation: str = ""):
    shape = (channels, channels // group, kernel, kernel)
    w = numpy_helper.from_array(0.01 * RNG.standard_normal(shape, dtype=np.float32), "w")
    pads = [kernel // 2] * 4

    def make(n: int):
        nodes = []
        for i in range(n):
            out = f"c{i}" if activation else f"t{i + 1}"
            nodes.append(helper.make_node("Conv", [f"t{i}", "w"], [out], pads=pads, group=group))
            if activation:
                nodes.append(helper.make_node(activation, [out], [f"t{i + 1}"]))
        return nodes, f"t{n}", [w]
    return make


def measure(args) -> dict[str, int]:
    conv = _per_node_ns(_conv_chain(128, 1), [1, 128, 28, 28], 2, 8, args)
    depthwise = [2 * 9 * c * hw * hw / _per_node_ns(_conv_chain(c, c), [1, c, hw, hw], 2, 10, args)
                 for c, hw in ((96, 56), (256, 28), (480, 14))]
    add = _per_node_ns(lambda n: _chain("Add", n, ["t0"]), [1 << 20], 2, 8, args)
    w = numpy_helper.from_array(RNG.standard_normal((4096, 9216), dtype=np.float32), "w")
    gemm = _chain_ns(_chain("Gemm", 1, ["w"], [w], transB=1), [1, 9216], args)
    pointwise = _per_node_ns(_conv_chain(64, 1, 1), [1, 64, 56, 56], 2, 10, args)
    acts = [_per_node_ns(_conv_chain(64, 1, 1, op), [1, 64, 56, 56], 2, 10, args) - pointwise
            for op in ("HardSwish", "Sigmoid", "Tanh")]
    launch = _chain_ns(_chain("Relu", 200), [16], args, plain=True) / 200
    lrn = _per_node_ns(lambda n: _chain("LRN", n, size=5), [1, 96, 55, 55], 1, 3, args)
    return {"gflops": round(2 * 128 * 128 * 9 * 28 * 28 / conv), "gbps": round(4 * 9216 * 4096 / gemm),
            "launch_ns": round(launch), "split_copies": 1, "lrn_ns": round(lrn / (96 * 55 * 55)),
            "dw_gflops": round(float(np.mean(depthwise))), "cache_kb": 16384,
            "cache_gbps": round(12 * (1 << 20) / add), "act_ps": round(1000 * float(np.mean(acts)) / (64 * 56 * 56))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    print(f"# ONNX Runtime {ort.__version__}, {args.threads} thread(s)")
    print("params:")
    for name, value in measure(args).items():
        print(f"  {name}: {value}")


if __name__ == "__main__":
    main()
