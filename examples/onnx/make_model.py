"""Writes small_cnn.onnx: a model eqdsl did not build, written with onnx.helper the way an exporter
would (explicit pads, biases, batch norm, a classifier head with Gemm and Softmax).

    python examples/onnx/make_model.py      # then: eqdsl run examples/onnx/config.yaml
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _w(rng, name, *dims, scale=None):
    fan_in = int(np.prod(dims[1:])) if len(dims) > 1 else 1
    value = rng.standard_normal(dims) / np.sqrt(fan_in) if scale is None else rng.uniform(*scale, dims)
    return numpy_helper.from_array(value.astype(np.float32), name)


def build(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    n = helper.make_node
    nodes = [n("Conv", ["x", "stem.w", "stem.b"], ["s"], pads=[1, 1, 1, 1], strides=[2, 2], kernel_shape=[3, 3]),
             n("BatchNormalization", ["s", "bn.g", "bn.b", "bn.m", "bn.v"], ["sb"], epsilon=1e-5),
             n("Relu", ["sb"], ["r"])]
    inits = [_w(rng, "stem.w", 32, 3, 3, 3), _w(rng, "stem.b", 32), _w(rng, "bn.g", 32, scale=(0.5, 1.5)),
             _w(rng, "bn.b", 32), _w(rng, "bn.m", 32), _w(rng, "bn.v", 32, scale=(0.5, 1.5))]
    branches = []
    for k, (out, kernel) in enumerate([(32, 1), (32, 3), (32, 3)]):  # an Inception-style block
        pad = kernel // 2
        nodes += [n("Conv", ["r", f"b{k}.w"], [f"c{k}"], pads=[pad] * 4, kernel_shape=[kernel, kernel]),
                  n("Relu", [f"c{k}"], [f"a{k}"])]
        inits.append(_w(rng, f"b{k}.w", out, 32, kernel, kernel))
        branches.append(f"a{k}")
    nodes += [n("Concat", branches, ["cat"], axis=1), n("GlobalAveragePool", ["cat"], ["g"]),
              n("Flatten", ["g"], ["f"]), n("Gemm", ["f", "fc.w", "fc.b"], ["logits"], transB=1),
              n("Softmax", ["logits"], ["y"], axis=-1)]
    inits += [_w(rng, "fc.w", 10, 96), _w(rng, "fc.b", 10)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 64, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    graph = helper.make_graph(nodes, "small_cnn", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


if __name__ == "__main__":
    out = Path(__file__).with_name("small_cnn.onnx")
    onnx.save(build(), out)
    print(f"wrote {out}")
