"""Regions of integer and boolean nodes (eqdsl.onnx.regions): a connected non-float subgraph on
the program's inputs is one opaque operator whose key holds the subgraph; validated, written back
as its own nodes (no If left), and computed by ONNX Runtime as the source model is."""
from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from eqdsl.frontend import load_language
from eqdsl.onnx.read import read_onnx

n = helper.make_node
ONE = numpy_helper.from_array(np.array(1, np.int32), "one")
TWO = numpy_helper.from_array(np.array(2, np.int32), "two")


def _model(nodes: list[onnx.NodeProto], inits: list) -> onnx.ModelProto:
    """bytes (int32 [1, 8]) → `nodes` (ending in float "f", [1, 8]) → MatMul(f, w) → y [1, 4]."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32), "w")
    graph = helper.make_graph([*nodes, n("MatMul", ["f", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("bytes", TensorProto.INT32, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w, *inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# bytes → Add 1 → Mul 2 → Equal 4 (a mask) → Where(mask, 5, bytes) → Cast float: four integer and
# boolean nodes, one region with one output
CHAIN = ([n("Add", ["bytes", "one"], ["a"]), n("Mul", ["a", "two"], ["b"]),
          n("Equal", ["b", "four"], ["mask"]), n("Where", ["mask", "five", "bytes"], ["c"]),
          n("Cast", ["c"], ["f"], to=TensorProto.FLOAT)],
         [ONE, TWO, numpy_helper.from_array(np.array(4, np.int32), "four"),
          numpy_helper.from_array(np.array(5, np.int32), "five")])


def _run(tmp_path, run_cli, model: onnx.ModelProto) -> tuple[dict, str]:
    onnx.save(model, tmp_path / "m.onnx")
    (tmp_path / "c.yaml").write_text("ruleset: cpu\ntarget: cpu\nprogram: {onnx: m.onnx}\n"
                                     "extract: {method: greedy-dag, compare: []}\nvalidate: {samples: 2}\n"
                                     "export: {format: onnx, runtime_check: false}\n")
    code, out, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 0, out + err
    return json.loads((tmp_path / "out" / "report.json").read_text()), out


def _outputs(path, feed: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"bytes": feed})[0]


def test_a_chain_of_integer_nodes_is_one_opaque_region_written_back_as_its_nodes(tmp_path, run_cli):
    model = _model(*CHAIN)
    onnx.save(model, tmp_path / "src.onnx")
    imported = read_onnx(tmp_path / "src.onnx", load_language("cpu"))
    opaque = [node.args[0] for node in imported.program.nodes if node.op.startswith("opaque")]
    assert len(opaque) == 2 and opaque[0].startswith("If(") and opaque[1].startswith("Cast(")  # region, then Cast
    assert any("1 region(s) of integer and boolean nodes (4 nodes)" in note for note in imported.notes)
    report, _ = _run(tmp_path, run_cli, model)
    assert report["validation"]["ok"]
    written = onnx.load(str(tmp_path / "out" / "optimized.onnx"))
    ops = [node.op_type for node in written.graph.node]
    assert "If" not in ops and ops.count("Add") == 1 and "Where" in ops, ops
    feed = np.arange(8, dtype=np.int32).reshape(1, 8)  # 1 → (1 + 1) * 2 == 4: the mask holds somewhere
    np.testing.assert_allclose(_outputs(tmp_path / "out" / "optimized.onnx", feed), _outputs(tmp_path / "src.onnx", feed),
                               rtol=1e-6)


def test_a_path_out_of_the_region_and_back_keeps_its_nodes_apart(tmp_path, run_cli):
    """a = bytes + 1; d = int(float(a) * 2); e = a + d: a region {a, d, e} would read its own
    output through the float Mul; its nodes are imported one by one instead."""
    nodes = [n("Add", ["bytes", "one"], ["a"]), n("Cast", ["a"], ["af"], to=TensorProto.FLOAT),
             n("Mul", ["af", "twof"], ["m"]), n("Cast", ["m"], ["d"], to=TensorProto.INT32),
             n("Add", ["a", "d"], ["e"]), n("Cast", ["e"], ["f"], to=TensorProto.FLOAT)]
    model = _model(nodes, [ONE, numpy_helper.from_array(np.array(2, np.float32), "twof")])
    onnx.save(model, tmp_path / "src.onnx")
    imported = read_onnx(tmp_path / "src.onnx", load_language("cpu"))
    assert not any(node.args[0].startswith("If(") for node in imported.program.nodes if node.op.startswith("opaque"))
    report, _ = _run(tmp_path, run_cli, model)
    assert report["validation"]["ok"]
    feed = np.arange(8, dtype=np.int32).reshape(1, 8)
    np.testing.assert_allclose(_outputs(tmp_path / "out" / "optimized.onnx", feed), _outputs(tmp_path / "src.onnx", feed),
                               rtol=1e-6)


def test_a_region_with_two_outputs_read_outside_and_a_model_output(tmp_path, run_cli):
    """bytes + 1 → (· * 2, · == 4): both read outside the region (a Cast each), and the mask is a
    model output of its own type too; the region is one If written back as its nodes."""
    nodes = [n("Add", ["bytes", "one"], ["a"]), n("Mul", ["a", "two"], ["b"]), n("Equal", ["a", "four"], ["mask"]),
             n("Cast", ["b"], ["bf"], to=TensorProto.FLOAT), n("Cast", ["mask"], ["mf"], to=TensorProto.FLOAT),
             n("Add", ["bf", "mf"], ["f"])]
    model = _model(nodes, [ONE, TWO, numpy_helper.from_array(np.array(4, np.int32), "four")])
    model.graph.output.append(helper.make_tensor_value_info("mask", TensorProto.BOOL, [1, 8]))
    onnx.save(model, tmp_path / "src.onnx")
    imported = read_onnx(tmp_path / "src.onnx", load_language("cpu"))
    regions = [node.args[0] for node in imported.program.nodes if str(node.args[0]).startswith("If(")]
    assert len(regions) == 2 and all("__output=[" in key for key in regions), regions  # outputs 0 and 1 of 2
    report, _ = _run(tmp_path, run_cli, model)
    assert report["validation"]["ok"]
    written = onnx.load(str(tmp_path / "out" / "optimized.onnx"))
    assert "If" not in [node.op_type for node in written.graph.node]
    assert [o.type.tensor_type.elem_type for o in written.graph.output] == [TensorProto.FLOAT, TensorProto.BOOL]
    feed = np.arange(8, dtype=np.int32).reshape(1, 8)
    session = ort.InferenceSession(str(tmp_path / "out" / "optimized.onnx"), providers=["CPUExecutionProvider"])
    source = ort.InferenceSession(str(tmp_path / "src.onnx"), providers=["CPUExecutionProvider"])
    got, want = session.run(None, {"bytes": feed}), source.run(None, {"bytes": feed})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_array_equal(got[1], want[1])
