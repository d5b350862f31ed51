"""The production convolution we time against: ONNX Runtime's CPU `Conv` on a one-node model.

Contract: `ort_conv(weights, threads)` returns f(x [C, H, W] float32) → [K, H − R + 1, W − S + 1]
(stride 1, no padding, no bias), run by an InferenceSession with `threads` intra-op threads.
"""
from __future__ import annotations

from typing import Callable

import numpy as np


def ort_conv(weights: np.ndarray, threads: int = 2) -> Callable[[np.ndarray], np.ndarray]:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    k, c, r, s = weights.shape
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[r, s], strides=[1, 1])
    graph = helper.make_graph([node], "qgym_conv",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, None, None])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, k, None, None])],
                              [numpy_helper.from_array(weights.astype(np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what every onnxruntime release since 1.10 reads
    onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def run(x: np.ndarray) -> np.ndarray:
        return session.run(["y"], {"x": x[None].astype(np.float32, copy=False)})[0][0]

    return run
