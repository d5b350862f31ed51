"""The `mined` ruleset (rules for the corpus' most frequent patterns, benchmarks/mine.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest


def test_the_mined_rules_are_verified(run_cli):
    code, out, _ = run_cli("verify", "mined", "--rule", "bn-scale", "--rule", "bn-shift", "--examples", "60")
    assert code == 0 and "2/2 rules" in out


def _bn_affine_model(conv_first: bool):
    """Caffe2's SpatialBN followed by a per-channel Mul and Add (the zoo's Inception-v2 after a
    Conv, DenseNet-121 after a concat)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    c = 8
    weights = {name: rng.uniform(0.5, 1.5, shape).astype(np.float32)
               for name, shape in [("s", [c]), ("b", [c]), ("m", [c]), ("v", [c]), ("f", [c, 1, 1]), ("g", [c, 1, 1]),
                                   ("w", [c, c, 1, 1])]}
    conv = [helper.make_node("Conv", ["x", "w"], ["cx"])] if conv_first else []
    nodes = [*conv, helper.make_node("BatchNormalization", ["cx" if conv_first else "x", "s", "b", "m", "v"], ["n"]),
             helper.make_node("Mul", ["n", "f"], ["nf"]), helper.make_node("Add", ["nf", "g"], ["y"])]
    graph = helper.make_graph(nodes, "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 16, 16])],
                              [numpy_helper.from_array(v, k) for k, v in weights.items() if conv_first or k != "w"])
    return onnx, helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("conv_first, target, predicted_gain", [(False, "t4", True), (False, "cpu", True),
                                                                (True, "cpu", False)])
def test_a_scale_and_shift_after_a_batch_norm_fold_into_it(tmp_path, run_cli, conv_first, target, predicted_gain):
    """Written as one BatchNormalization, validated. After a Conv, the CPU target knows ONNX Runtime
    folds the batch norm, scale and shift into the Conv itself (runtime_rules): no gain there."""
    onnx, model = _bn_affine_model(conv_first)
    onnx.save(model, tmp_path / "m.onnx")
    (tmp_path / "c.yaml").write_text(f"ruleset: mined\ntarget: {target}\nprogram: {{onnx: m.onnx}}\n"
                                     "extract: {method: greedy-dag, compare: []}\nvalidate: {samples: 2}\n"
                                     "export: {format: onnx, runtime_check: false}\n")
    code, out, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--quiet")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert code == 0 and report["validation"]["ok"], out + err
    baseline = report["runtime_input_cost"] or report["original_cost"]  # the input as its runtime runs it
    assert (baseline > report["best_cost"] * 1.01) == predicted_gain, (baseline, report["best_cost"])
    if predicted_gain:
        ops = [n.op_type for n in onnx.load(str(tmp_path / "out" / "optimized.onnx")).graph.node]
        assert ops == ["BatchNormalization"], ops
