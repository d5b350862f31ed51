"""LRN (AlexNet's and GoogLeNet's local response normalization): imported at their attributes,
its reference semantics equal to ONNX Runtime's LRN, and the CPU rules' `lrn-as-product` written
as Mul, Conv, Add, Sqrt and Reciprocal nodes that compute the same."""
from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from eqdsl.frontend import load_language
from eqdsl.languages.tensor import reference as ref
from eqdsl.onnx.read import read_onnx

C = 32


def _model(lrn_attrs: dict, channels: int = C, stages: int = 1) -> onnx.ModelProto:
    """x → (Conv → Relu → LRN(lrn_attrs)) × stages → y, each stage's Conv doubling the channels."""
    rng = np.random.default_rng(0)
    nodes, inits, into, width = [], [], ("x", 3), channels
    for k in range(stages):
        inits.append(numpy_helper.from_array(rng.standard_normal((width, into[1], 3, 3)).astype(np.float32), f"w{k}"))
        nodes += [helper.make_node("Conv", [into[0], f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{k}"], [f"r{k}"]),
                  helper.make_node("LRN", [f"r{k}"], [f"y{k}"], **lrn_attrs)]
        into, width = (f"y{k}", width), width * 2
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, into[1], 8, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


ALEXNET = {"size": 5, "alpha": 9.999999747378752e-05, "beta": 0.75, "bias": 1.0}  # as its ONNX file holds them


def _ort_lrn(x: np.ndarray, alpha: float, bias: float) -> np.ndarray:
    graph = helper.make_graph([helper.make_node("LRN", ["x"], ["y"], size=5, alpha=alpha, beta=0.75, bias=bias)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x.astype(np.float32)})[0]


@pytest.mark.parametrize("channels", [1, 3, 7, 32])
@pytest.mark.parametrize("alpha, bias", [(1e-4, 1.0), (5e-4, 2.0)])
def test_the_reference_is_onnx_runtimes_lrn_and_the_factor_its_divisor(channels, alpha, bias):
    x = np.random.default_rng(channels).standard_normal((2, channels, 4, 5)) * 30  # squares that count
    expected = _ort_lrn(x, alpha, bias)
    a, b = np.array(np.float32(alpha), np.float64), np.array(bias)
    np.testing.assert_allclose(ref.lrn(x, a, b), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x * ref.lrn_scale(x, a, b), expected, rtol=1e-5, atol=1e-6)


def test_alpha_and_bias_are_the_exact_scalars_and_another_size_stays_opaque(tmp_path):
    """ZFNet-512's LRN (alpha 5e-4, bias 2) is an lrn with those scalars; one of size 3 is not."""
    onnx.save(_model({"size": 5, "alpha": 5e-4, "beta": 0.75, "bias": 2.0}), tmp_path / "m.onnx")
    program = read_onnx(tmp_path / "m.onnx", load_language("cpu")).program
    lrn = next(node for node in program.nodes if node.op == "lrn")
    alpha, bias = (program.nodes[arg.index].args for arg in lrn.args[1:])
    assert np.float32(alpha[0] / alpha[1]) == np.float32(5e-4) and bias == (2, 1)
    onnx.save(_model({"size": 3}), tmp_path / "m3.onnx")
    imported = read_onnx(tmp_path / "m3.onnx", load_language("cpu"))
    assert not [node for node in imported.program.nodes if node.op == "lrn"]
    assert any("LRN" in note and "size 3" in note for note in imported.notes), imported.notes


def test_the_cpu_rules_write_lrn_as_its_product_and_onnx_runtime_agrees(tmp_path, run_cli):
    """Two LRNs of ZFNet's bias 2 at 32 and 64 channels: their band Convs take the shift of 2 as a
    bias each, of its own width (one shared bias of 32 values failed ONNX Runtime's check)."""
    onnx.save(_model({**ALEXNET, "bias": 2.0}, stages=2), tmp_path / "m.onnx")
    (tmp_path / "c.yaml").write_text("ruleset: cpu\ntarget: cpu\nprogram: {onnx: m.onnx}\n"
                                     "extract: {method: greedy-dag, compare: []}\nvalidate: {samples: 2}\n"
                                     "export: {format: onnx, runs: 20}\n")
    code, out, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 0, out + err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["validation"]["ok"] and report["export"]["runtime"]["ok"], report["export"]
    assert report["predicted_speedup"] > 1.5  # the CPU target prices ORT's LRN kernel at lrn_ns an element
    written = tmp_path / "out" / ("written.onnx" if (tmp_path / "out" / "written.onnx").exists() else "optimized.onnx")
    ops = [node.op_type for node in onnx.load(str(written)).graph.node]
    assert "LRN" not in ops and ops.count("Sqrt") == 4 and ops.count("Reciprocal") == 2, ops


def test_an_lrn_the_rules_leave_is_written_as_an_lrn(tmp_path, run_cli):
    """On a GPU target (no `lrn_ns`: the roofline) the product is dearer: LRN stays, written back."""
    onnx.save(_model(ALEXNET), tmp_path / "m.onnx")
    (tmp_path / "c.yaml").write_text("ruleset: cpu\ntarget: t4\nprogram: {onnx: m.onnx}\n"
                                     "extract: {method: greedy-dag, compare: []}\nvalidate: {samples: 1}\n"
                                     "export: {format: onnx, runtime_check: false}\n")
    code, out, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 0, out + err
    nodes = onnx.load(str(tmp_path / "out" / "optimized.onnx")).graph.node
    lrn = [node for node in nodes if node.op_type == "LRN"]
    attrs = {a.name: helper.get_attribute_value(a) for a in lrn[0].attribute}
    assert len(lrn) == 1 and attrs == {"size": 5, "alpha": pytest.approx(1e-4), "beta": 0.75, "bias": 1.0}


@pytest.mark.parametrize("computed", ["alpha", "bias"])
def test_an_lrn_with_a_computed_scalar_is_written_as_x_times_its_factor(computed):
    """ONNX's LRN takes alpha and bias as attributes: where one depends on the program's inputs
    (here a scalar input times a constant) the writer emits x · lrnscale, which ONNX Runtime
    computes as the reference does."""
    from eqdsl.ir.builder import GraphBuilder
    from eqdsl.onnx.write import to_onnx
    from eqdsl.verify.semantics import evaluate_program, load_semantics

    lang = load_language("cpu")
    g = GraphBuilder(lang)
    x = g.input("x", [1, 8, 3, 3])
    alpha, bias = g.op("scalar", 1, 5000), g.op("scalar", 2, 1)
    given = g.input("s", [])
    twice = g.op("ewmul", alpha if computed == "alpha" else bias, given)
    y = g.op("lrn", x, *((twice, bias) if computed == "alpha" else (alpha, twice)))
    program = g.program("p", [y])
    model = to_onnx(lang, program, {})
    assert "LRN" not in [n.op_type for n in model.graph.node]
    feed = np.random.default_rng(1).standard_normal((1, 8, 3, 3)).astype(np.float32) * 20
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    s = np.array(2.0, np.float32)
    got = session.run(None, {"x": feed, "s": s})[0]
    want = evaluate_program(program, load_semantics(lang), 0,
                            lambda n: (feed if n.args[0] == "x" else s).astype(np.float64))[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
