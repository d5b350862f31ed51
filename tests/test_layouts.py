"""The runtime's blocked layout (eqdsl.cost.layouts): its reorders as ONNX Runtime inserts them,
read from the optimized graph ORT saves, and the target file's `layouts` section."""
from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper

from eqdsl.cost.layouts import Layouts, Selected, folded_cost, read_layouts, reorder_cost
from eqdsl.cost.targets import target_path
from eqdsl.diagnostics import EqdslError
from eqdsl.extract.egraph import build_problem

C = 32  # channels: blockable on ORT's NCHWc (a multiple of 4, and a Conv reads at least 16 blocked)


def _between_convs(middle: list[onnx.NodeProto], constants: dict[str, np.ndarray], c: int = C) -> onnx.ModelProto:
    """x → Conv → `middle` (reads "a", writes "m") → Conv → y, all of `c` channels."""
    rng = np.random.default_rng(0)
    constants = {k: v[:c] if v.size == C else v for k, v in constants.items()}
    weights = {"w1": rng.standard_normal((c, c, 3, 3)), "w2": rng.standard_normal((c, c, 3, 3)), **constants}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]), *middle,
             helper.make_node("Conv", ["m", "w2"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 8, 8])],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


CASES = {  # name: (middle nodes, their constants)
    "scalar-mul": ([helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Mul", ["r", "s"], ["m"])],
                   {"s": np.array(0.5)}),
    "relu": ([helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Relu", ["r"], ["m"])], {}),
    "same-shape-add": ([helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Sigmoid", ["a"], ["g"]),
                        helper.make_node("Add", ["r", "g"], ["m"])], {}),
    "scalar-div": ([helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Div", ["r", "s"], ["m"])],
                   {"s": np.array(6.0)}),
    "channel-mul": ([helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Mul", ["r", "s"], ["m"])],
                    {"s": np.linspace(0.5, 1.5, C).reshape(C, 1, 1)}),
    "channel-add": ([helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Add", ["r", "s"], ["m"])],
                    {"s": np.linspace(0.5, 1.5, C).reshape(C, 1, 1)}),
    "conv-bias": ([helper.make_node("Add", ["a", "s"], ["m"])], {"s": np.linspace(0.5, 1.5, C).reshape(C, 1, 1)}),
}


def _ort_reorders(path) -> int:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(path.with_name("ort.onnx"))
    options.log_severity_level = 3
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]
    return ops.count("ReorderInput") + ops.count("ReorderOutput")


@pytest.mark.parametrize("channels", [C, 12])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_input_reorders_are_those_onnx_runtime_inserts(tmp_path, run_cli, case, channels):
    """Priced at 1 ns a copy and free bandwidth, the input's reorders count ORT's ReorderInput and
    ReorderOutput nodes in the graph it optimized for this machine (12 channels: the Convs run
    blocked, the second reads its input plain)."""
    onnx.save(_between_convs(*CASES[case], channels), tmp_path / "m.onnx")
    (tmp_path / "t.yaml").write_text(_count_target())
    (tmp_path / "c.yaml").write_text("ruleset: cpu\ntarget: t.yaml\nprogram: {onnx: m.onnx}\n"
                                     "extract: {method: greedy-dag, compare: []}\n")
    code, out, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 0, out + err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert round(report["layout_reorders"]["input"]) == _ort_reorders(tmp_path / "m.onnx")


def _count_target() -> str:
    """The CPU target, a reorder priced 1 ns: the reorders' cost is their count."""
    data = yaml.safe_load(target_path("cpu", None).read_text())
    data["params"].update(gbps=10**15, cache_gbps=10**15, launch_ns=1)
    return yaml.safe_dump(data)


def test_a_rewrite_that_removes_a_scalar_op_saves_its_reorders(tmp_path, run_cli):
    """PP-OCR's affine block `conv(x) * s` folded into the convolution: the optimized program has
    no plain operator between its convolutions, and the predicted speedup counts the copies saved."""
    model = _between_convs([helper.make_node("Mul", ["a", "s"], ["m"])], {"s": np.array(0.5)})
    onnx.save(model, tmp_path / "m.onnx")
    (tmp_path / "c.yaml").write_text("ruleset: cpu\ntarget: cpu\nprogram: {onnx: m.onnx}\n"
                                     "extract: {method: greedy-dag, compare: []}\n")
    code, out, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out")
    assert code == 0, out + err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    reorders, folds = report["layout_reorders"], report["conv_folds"]
    assert reorders["input"] > reorders["optimized"] > 0  # the graph's own input and output stay plain
    as_run = report["runtime_input_cost"] or report["original_cost"]
    assert report["predicted_speedup"] == pytest.approx(
        (as_run + reorders["input"] - folds["input"]) / (report["best_cost"] + reorders["optimized"] - folds["optimized"]))
    assert "predicted speedup" in out and "reorders and folds included" in out


def test_reorders_of_a_hand_built_selection():
    """input → conv → smul(scalar) → conv: four copies (the input into the block, the first
    conv's output out of it, the product back in, the output out); a constant costs none."""
    rows = [("x", "input", "cx", [], 0.0, False), ("w", "weight", "cw", [], 0.0, False),
            ("s", "scalar", "cs", [], 0.0, False), ("c1", "conv2d", "c1", ["cx", "cw"], 1.0, False),
            ("m", "smul", "cm", ["c1", "cs"], 1.0, False), ("c2", "conv2d", "c2", ["cm", "cw"], 1.0, False)]
    problem = build_problem(rows, ["c2"], children_are_classes=True)
    selection = {c: nodes[0] for c, nodes in enumerate(problem.class_nodes)}
    layouts = Layouts(16, 4, frozenset({"conv2d"}), frozenset({"smul", "relu"}))
    params = {"gbps": 4, "launch_ns": 10}

    def cost(c: int) -> float:
        shape = (1, c, 8, 8)
        shapes = {"cx": shape, "cw": (c, c, 3, 3), "cs": (), "c1": shape, "cm": shape, "c2": shape}
        return reorder_cost(layouts, Selected(problem, selection, shapes, {}, {}), params)
    assert cost(C) == 4 * (10 + 8 * C * 64 / 4)
    # 12: each Conv reads plain, writes blocked (the product and the output copied out); 18: never blocked
    assert cost(12) == 2 * (10 + 8 * 12 * 64 / 4)
    assert cost(18) == 0


CONV_PARAMS = ("sh", "sw", "pad", "act", "x", "w")


def _bias_then_pad(act: int, conv_readers: int = 1) -> float:
    """input → conv(act) → ewadd(its bias, one value per channel) → pad2d → VALID conv, hand-built
    (costs: convs 5, the bias 2, the pad 3); `conv_readers` 2: the first conv's output is a root too."""
    rows = [("x", "input", "cx", [], 0.0, False), ("w", "weight", "cw", [], 0.0, False),
            ("b", "weight", "cb", [], 0.0, False), ("one", "1", "c_one", [], 0.0, False),
            ("zero", "0", "c_zero", [], 0.0, False), ("act", str(act), "c_act", [], 0.0, False),
            ("c1", "conv2d", "c1", ["c_one", "c_one", "c_zero", "c_act", "cx", "cw"], 5.0, False),
            ("a", "ewadd", "ca", ["c1", "cb"], 2.0, False),
            ("p", "pad2d", "cp", ["ca", "c_one", "c_one", "c_one", "c_one", "c_zero"], 3.0, False),
            ("c2", "conv2d", "c2", ["c_one", "c_one", "c_one", "c_zero", "cp", "cw"], 5.0, False)]
    problem = build_problem(rows, ["c2", "c1"][:conv_readers], children_are_classes=True)
    selection = {c: nodes[0] for c, nodes in enumerate(problem.class_nodes)}
    activation = (1, C, 8, 8)
    shapes = {"cx": activation, "cw": (C, C, 3, 3), "cb": (C, 1, 1), "c1": activation, "ca": activation,
              "cp": (1, C, 10, 10), "c2": activation}
    values = {"c_one": 1, "c_zero": 0, "c_act": act}
    layouts = Layouts(16, 4, frozenset({"conv2d"}), frozenset({"ewadd"}), biases=frozenset({"ewadd"}),
                      folded=frozenset({"pad2d"}), activation="act", convolutions=frozenset({"conv2d"}),
                      conv_folds=frozenset({"ewadd", "batchnorm"}))
    program = Selected(problem, selection, shapes, values, {"conv2d": CONV_PARAMS})
    return folded_cost(layouts, program)


def test_a_bias_and_a_pad_beside_convolutions_run_inside_them():
    """ORT folds a per-channel Add after a Conv into its bias and writes a Pad into the Conv after
    it: both cost nothing on the runtime. Not the bias of a Conv that fused an activation (Conv +
    Relu, then Add) or whose output another node reads too."""
    assert _bias_then_pad(act=0) == 2.0 + 3.0
    assert _bias_then_pad(act=2) == 3.0
    assert _bias_then_pad(act=0, conv_readers=2) == 3.0


def test_a_bad_layouts_section_names_its_path():
    assert read_layouts(None, "t.yaml: layouts") is None
    for data, where in [({"min_channels": 0, "channel_multiple": 4}, "layouts.min_channels"),
                        ({"min_channels": 16, "channel_multiple": 4, "blocked": "conv2d"}, "layouts.blocked"),
                        ({"min_channels": 16, "channel_multiple": 4, "fellow": []}, "layouts")]:
        with pytest.raises(EqdslError) as err:
            read_layouts(data, "layouts")
        assert where in str(err.value)
