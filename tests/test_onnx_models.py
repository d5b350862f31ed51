"""What real exporters write (issue 44), in small models built with `onnx.helper`: an old opset and a
dynamic batch dimension, shape arithmetic, int64 operands, a Resize with its `roi` left empty,
ReduceMean's opset-13 `axes` attribute, explicit Conv pads and GlobalAveragePool — imported, run,
validated on the model's own constants, exported faithfully, and never handed back slower."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from eqdsl.frontend import load_language
from eqdsl.onnx.read import read_onnx

from conftest import EXAMPLES


def _const(name: str, values, dtype=np.int64) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


def exporter_model() -> onnx.ModelProto:
    """Opset 11, batch dimension `N`: Conv with pads 2 (not SAME) → Relu → GlobalAveragePool →
    Reshape to [N, C] through Shape → Gather → Unsqueeze → Concat, as PyTorch and paddle2onnx write it."""
    rng = np.random.default_rng(0)
    n = helper.make_node
    nodes = [n("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[2, 2, 2, 2]),
             n("Relu", ["c"], ["r"]), n("GlobalAveragePool", ["r"], ["g"]),
             n("Shape", ["g"], ["s"]), n("Gather", ["s", "zero"], ["batch"], axis=0),
             n("Unsqueeze", ["batch"], ["batch1"], axes=[0]), n("Concat", ["batch1", "minus1"], ["target"], axis=0),
             n("Reshape", ["g", "target"], ["y"])]
    inits = [numpy_helper.from_array(rng.normal(size=(8, 3, 3, 3)).astype(np.float32) / 5, "w"),
             numpy_helper.from_array(rng.normal(size=8).astype(np.float32), "b"),
             _const("zero", 0), _const("minus1", [-1])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])
    graph = helper.make_graph(nodes, "exported", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=7)


def operand_model() -> onnx.ModelProto:
    """Opset 13: Slice with int64 starts/ends/axes, Resize with an empty `roi` and float scales,
    ReduceMean with its (pre-18) `axes` attribute."""
    n = helper.make_node
    nodes = [n("Slice", ["x", "starts", "ends", "axes"], ["s"]),
             n("Resize", ["s", "", "scales"], ["r"], mode="nearest"),
             n("ReduceMean", ["r"], ["y"], axes=[2, 3], keepdims=1)]
    inits = [_const("starts", [1]), _const("ends", [7]), _const("axes", [2]),
             _const("scales", [1.0, 1.0, 2.0, 2.0], np.float32)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])
    graph = helper.make_graph(nodes, "operands", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.fixture(scope="module")
def tensat():
    return load_language("tensat")


def test_dynamic_input_is_refused_listing_it_and_the_option(tmp_path, run_cli):
    onnx.save(exporter_model(), tmp_path / "m.onnx")
    code, _, err = run_cli("import", "onnx", tmp_path / "m.onnx")
    assert code == 2 and "input(s) with dynamic dimensions: x [N, 3, 16, 16]" in err
    assert "--shape x=1,3,16,16" in err and "shapes: {x: [1, 3, 16, 16]}" in err and "Traceback" not in err
    code, _, err = run_cli("import", "onnx", tmp_path / "m.onnx", "--shape", "y=1,3,16,16")
    assert code == 2 and "shape given for 'y', which is not an input of the model" in err


def test_old_opset_converts_and_shape_arithmetic_folds(tmp_path, tensat, run_cli):
    onnx.save(exporter_model(), tmp_path / "m.onnx")
    imported = read_onnx(tmp_path / "m.onnx", tensat, {"x": (2, 3, 16, 16)})
    assert imported.notes == ("converted from ONNX opset 11 to 13 (onnx.version_converter)",)
    ops = [n.op for n in imported.program.nodes]
    assert "pad2d" in ops and "poolavg" in ops and not any(op.startswith("opaque") for op in ops)
    assert imported.program.nodes[imported.program.roots[0]].op == "reshape"  # [2, 8] from folded Shape → Concat
    code, out, err = run_cli("import", "onnx", tmp_path / "m.onnx", "--shape", "x=2,3,16,16")
    assert code == 0 and "note: converted from ONNX opset 11 to 13" in err and "reshape(" in out


def _run(tmp_path, run_cli, model: onnx.ModelProto, program: str, export: str = "onnx") -> tuple[int, dict, str]:
    onnx.save(model, tmp_path / "m.onnx")
    (tmp_path / "run.yaml").write_text(
        f"ruleset: tensat\ntarget: t4\nprogram: {program}\nschedule: {{iter_limit: 2, node_limit: 3000}}\n"
        f"extract: {{method: greedy-dag, compare: []}}\nvalidate: {{samples: 1}}\nexport: {export}\n")
    code, out, err = run_cli("run", tmp_path / "run.yaml", "--output", tmp_path / "out", "--quiet")
    report = json.loads((tmp_path / "out" / "report.json").read_text()) if code in (0, 1) else {}
    return code, report, out + err


def test_exported_model_is_the_input_node_for_node(tmp_path, run_cli):
    """No rewrite applies: the Conv keeps its pads (no Pad node), GlobalAveragePool stays, the
    shape arithmetic is a constant; validation and ONNX Runtime agree."""
    code, report, text = _run(tmp_path, run_cli, exporter_model(), "{onnx: m.onnx, shapes: {x: [1, 3, 16, 16]}}")
    assert code == 0, text
    assert report["validation"]["ok"] and report["export"]["ok"] and report["input_notes"]
    assert "input: converted from ONNX opset 11 to 13" in text
    out = onnx.load(str(tmp_path / "out" / "optimized.onnx"))
    kinds = [n.op_type for n in out.graph.node]
    assert kinds[:3] == ["Conv", "Relu", "GlobalAveragePool"] and "Pad" not in kinds
    conv = out.graph.node[0]
    assert {a.name: list(a.ints) for a in conv.attribute if a.name == "pads"} == {"pads": [2, 2, 2, 2]}


def test_int64_operands_empty_roi_and_opset_13_attributes_run(tmp_path, run_cli):
    """Slice's int64 operands and Resize's empty roi are kept in the opaque key; validation uses
    the model's own scales; the export stays at opset 13, where ReduceMean's `axes` is an attribute."""
    code, report, text = _run(tmp_path, run_cli, operand_model(), "{onnx: m.onnx}")
    assert code == 0, text
    assert report["validation"]["ok"] and report["export"]["ok"]
    out = onnx.load(str(tmp_path / "out" / "optimized.onnx"))
    assert [o.version for o in out.opset_import if o.domain == ""] == [13]
    resize = next(n for n in out.graph.node if n.op_type == "Resize")
    assert resize.input[1] == ""  # roi stays omitted: scales stay in their slot


def test_a_0_d_constant_operand_stays_0_d(tmp_path, run_cli):
    """`x[:, 0]` as PyTorch exports it: Gather with a 0-d int64 index drops the axis."""
    n = helper.make_node
    graph = helper.make_graph([n("Gather", ["x", "zero"], ["g"], axis=1), n("MatMul", ["g", "w"], ["y"])], "select",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                              [_const("zero", 0), _const("w", np.ones((8, 4)), np.float32)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    code, report, text = _run(tmp_path, run_cli, model, "{onnx: m.onnx}")
    assert code == 0 and report["export"]["ok"], text


def test_a_constant_over_the_key_limit_is_a_weight_of_its_own_type(tmp_path, tensat, monkeypatch):
    """With no room in the key, Slice's int64 starts, ends and axes are weights that stay int64 (a
    quantized model's weights take this path), and the written model computes the source's."""
    import onnxruntime as ort

    import eqdsl.onnx.opaque_nodes as forms
    from eqdsl.onnx.write import to_onnx

    monkeypatch.setattr(forms, "MAX_KEPT_CONSTANT", 0)
    onnx.save(operand_model(), tmp_path / "m.onnx")
    imported = read_onnx(tmp_path / "m.onnx", tensat)
    assert {imported.weights[k].dtype for k in ("starts", "ends", "axes")} == {np.dtype(np.int64)}
    written = to_onnx(tensat, imported.program, imported.weights)
    x = {"x": np.random.default_rng(0).standard_normal((1, 4, 8, 8)).astype(np.float32)}
    want, got = (ort.InferenceSession(m.SerializeToString()).run(None, x)[0] for m in (operand_model(), written))
    assert np.allclose(want, got)


@pytest.mark.parametrize("conv", [
    {"pads": [2, 2, 2, 2], "dilations": [2, 2]},
    {"pads": [2, 3, 2, 3], "dilations": [2, 3]},  # (ONNX Runtime refuses dilations with SAME auto_pad)
    {"strides": [2, 2], "pads": [1, 0, 3, 2], "dilations": [3, 2]},
])
def test_a_dilated_conv_is_a_language_operator_that_runs_validates_and_exports(tmp_path, tensat, run_cli, conv):
    """A dilated Conv (DeepLab's) imports as `dconv2d` after an explicit pad (it was an opaque
    Conv), is written back as one Conv with its dilations, and ONNX Runtime computes the same."""
    import onnxruntime as ort

    from eqdsl.onnx.write import to_onnx

    model = exporter_model()
    model.graph.node[0].CopyFrom(helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], **conv))
    onnx.save(model, tmp_path / "m.onnx")
    imported = read_onnx(tmp_path / "m.onnx", tensat, {"x": (1, 3, 16, 16)})
    assert "dconv2d" in [n.op for n in imported.program.nodes] and not any("Conv" in note for note in imported.notes)
    written = to_onnx(tensat, imported.program, imported.weights)
    convs = [n for n in written.graph.node if n.op_type == "Conv"]
    assert len(convs) == 1 and [list(a.ints) for a in convs[0].attribute if a.name == "dilations"] == [conv["dilations"]]
    x = {"x": np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    fixed = onnx.load(str(tmp_path / "m.onnx"))
    fixed.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    want, got = (ort.InferenceSession(m.SerializeToString()).run(None, x)[0] for m in (fixed, written))
    assert np.allclose(want, got, rtol=1e-4, atol=1e-5)
    code, report, text = _run(tmp_path, run_cli, model, "{onnx: m.onnx, shapes: {x: [1, 3, 16, 16]}}")
    assert code == 0 and report["validation"]["ok"] and report["export"]["ok"], text


@pytest.mark.parametrize("keep", [False, True])
def test_a_model_measured_slower_is_not_handed_back(tmp_path, run_cli, monkeypatch, keep):
    import eqdsl.exports.onnx as export
    from eqdsl.onnx.runtime import RuntimeCheck

    def slower(original, others, runs, seed, thread_counts=None, fixed=None, shapes=None, device="cpu"):
        return [RuntimeCheck(True, 0.0, runs, {1: 1.0}, {1: 1.5}, "ONNX Runtime outputs agree", (1.4, 1.6))]

    monkeypatch.setattr(export, "compare_many", slower)
    code, report, text = _run(tmp_path, run_cli, onnx.load(str(EXAMPLES / "onnx" / "small_cnn.onnx")),
                              "{onnx: m.onnx}", f"{{format: onnx, keep_if_slower: {str(keep).lower()}}}")
    assert code == 0 and not report["export"]["unchanged"], text  # a rewritten program, measured slower
    runtime = report["export"]["runtime"]
    assert runtime["slower"] and runtime["kept"] == ("optimized" if keep else "input")
    out = onnx.load(str(tmp_path / "out" / "optimized.onnx"))
    if keep:
        assert "kept anyway (export.keep_if_slower)" in text
    else:
        assert "optimized.onnx is the input model" in text and "1.00 → 1.50 ms" in text
        assert out.graph == onnx.load(str(tmp_path / "m.onnx")).graph


@pytest.mark.parametrize("fastest", ["candidate-2", "input"])
def test_candidates_are_timed_with_the_input_and_the_fastest_is_handed_back(tmp_path, run_cli, monkeypatch, fastest):
    import eqdsl.exports.onnx as export
    from eqdsl.onnx.runtime import RuntimeCheck

    def times(original, others, runs, seed, thread_counts=None, fixed=None, shapes=None, device="cpu"):  # runs in the worker process
        ms = {"optimized": 1.5, "candidate-2": 0.8 if fastest == "candidate-2" else 1.2}
        beyond_noise = {"candidate-2": (0.7, 0.9)} if fastest == "candidate-2" else {}
        return [RuntimeCheck(True, 0.0, runs, {1: 1.0}, {1: ms.get(Path(o).stem, 1.3)}, "agree",
                             beyond_noise.get(Path(o).stem, (0.9, 1.6))) for o in others]

    monkeypatch.setattr(export, "compare_many", times)
    onnx.save(onnx.load(str(EXAMPLES / "onnx" / "small_cnn.onnx")), tmp_path / "m.onnx")
    (tmp_path / "run.yaml").write_text(
        "ruleset: tensat\ntarget: t4\nprogram: {onnx: m.onnx}\nschedule: {iter_limit: 5, node_limit: 3000}\n"
        "extract: {method: cpsat, compare: [], time_limit_s: 10, candidates: 3}\nexport: onnx\n")
    code, out, err = run_cli("run", tmp_path / "run.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 0, out + err
    runtime = json.loads((tmp_path / "out" / "report.json").read_text())["export"]["runtime"]
    assert [c["name"] for c in runtime["candidates"]][:2] == ["optimized", "candidate-2"]
    assert runtime["handed_back"] == fastest
    handed = (tmp_path / "out" / "optimized.onnx").read_bytes()
    if fastest == "input":
        assert runtime["kept"] == "input" and onnx.load_from_string(handed).graph == onnx.load(str(tmp_path / "m.onnx")).graph
    else:
        assert handed == (tmp_path / "out" / "candidate-2.onnx").read_bytes()


def test_ratio_interval_tells_noise_from_slower():
    from eqdsl.onnx.runtime import ratio_interval

    rng = np.random.default_rng(1)
    base = list(1.0 + 0.05 * rng.standard_normal(40))
    noise = list(1.0 + 0.05 * rng.standard_normal(40))
    assert ratio_interval(base, noise)[0] <= 1.0 <= ratio_interval(base, noise)[1]
    assert ratio_interval(base, [1.2 * b for b in base])[0] > 1.0


def test_the_speedup_shown_is_the_statistic_the_interval_bounds():
    """Paired runs where the ratio of the medians says slower (0.83×) and the per-run ratios
    faster (their median 0.95): the speedup shown is the one the interval bounds."""
    from eqdsl.onnx.runtime import RuntimeCheck, ratio_interval

    original = [1.0] * 6 + [2.0] * 5
    optimized = [1.2] * 3 + [0.95] * 3 + [1.5] * 5
    low, high = ratio_interval(original, optimized)
    per_run = float(np.median(np.asarray(optimized) / np.asarray(original)))
    check = RuntimeCheck(True, 0.0, 11, {1: float(np.median(original))}, {1: float(np.median(optimized))}, "",
                         (low, high), {1: per_run})
    assert float(np.median(original)) / float(np.median(optimized)) < 1.0 < check.speedup(1)
    assert 1 / high <= check.speedup(1) <= 1 / low


def test_external_data_outside_the_models_folder_is_refused(tmp_path, run_cli):
    weight = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save_model(model, str(tmp_path / "m.onnx"), save_as_external_data=True, location="w.bin", size_threshold=0)
    escaped = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    (tmp_path / "sub").mkdir()
    for entry in escaped.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../w.bin"
    onnx.save(escaped, str(tmp_path / "sub" / "evil.onnx"))
    code, _, err = run_cli("import", "onnx", tmp_path / "sub" / "evil.onnx", "-o", tmp_path / "p.eqr")
    assert code == 2 and "points outside the directory" in err and "Traceback" not in err
    assert not (tmp_path / "p.eqr").exists()


def test_a_float16_model_passes_through_as_opaque_operators(tmp_path, run_cli):
    """float16 in, float16 out: a typed input, operators kept opaque (the rules are float32's), the
    output's type inferred; `optimize` hands back a working model."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(tmp_path / "h.onnx"))
    code, out, err = run_cli("optimize", tmp_path / "h.onnx", "-o", tmp_path / "o.onnx")
    assert code == 0 and "Traceback" not in err, out + err
    written = onnx.load(str(tmp_path / "o.onnx"))
    assert written.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT16


def test_an_n_d_matmul_is_written_back_as_one_matmul(tmp_path, tensat):
    """The import flattens [1, 4, 4, 8] × [8, 6] into 2-D rows; the export writes one MatMul again,
    so that ONNX Runtime can fuse it with the Add after it (no Reshape between)."""
    from eqdsl.onnx.write import interface_of, write_program

    rng = np.random.default_rng(0)
    n = helper.make_node
    inits = [numpy_helper.from_array(rng.normal(size=(8, 6)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(size=6).astype(np.float32), "b")]
    graph = helper.make_graph([n("MatMul", ["x", "w"], ["m"]), n("Add", ["m", "b"], ["y"])], "nd",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 6])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    imported = read_onnx(tmp_path / "m.onnx", tensat)
    assert "reshape" in {node.op for node in imported.program.nodes}
    write_program(tensat, imported.program, imported.weights, tmp_path / "out.onnx", interface_of(tmp_path / "m.onnx"))
    ops = [node.op_type for node in onnx.load(str(tmp_path / "out.onnx")).graph.node]
    assert ops == ["MatMul", "Add"]
    from eqdsl.onnx.runtime import compare

    assert compare(tmp_path / "m.onnx", tmp_path / "out.onnx", runs=1).ok


def test_a_model_handed_back_unchanged_is_timed_at_the_configured_shapes(tmp_path, run_cli):
    """The user's file (dims left dynamic) is handed back unchanged; the runtime check feeds it the
    `shapes:` of the config, not ones (a reflect Pad needs 2 or more)."""
    n = helper.make_node
    graph = helper.make_graph([n("Pad", ["x", "pads"], ["y"], mode="reflect")], "dyn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "L"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "M"])],
                              [_const("pads", [0, 2, 0, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    code, report, text = _run(tmp_path, run_cli, model, "{onnx: m.onnx, shapes: {x: [1, 8]}}")
    assert code == 0, text
    assert report["export"]["unchanged"] and report["export"]["runtime"]["ok"]


def test_onnx_runtime_failing_in_the_check_is_a_failed_check_not_a_traceback(tmp_path, run_cli, monkeypatch):
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail

    import eqdsl.exports.onnx as export

    def fails(*args, **kwargs):
        raise Fail("the kernel refused")

    monkeypatch.setattr(export, "compare_many", fails)
    monkeypatch.setattr(export, "_same_operators", lambda *paths: False)  # else eqdsl's writing is not timed
    code, report, text = _run(tmp_path, run_cli, operand_model(), "{onnx: m.onnx}")
    assert code == 1 and "Traceback" not in text
    assert "ONNX Runtime could not run the models: the kernel refused" in text
    assert report["export"]["runtime"]["ok"] is False


def test_a_weight_of_one_repeated_value_stays_constant_of_shape(tmp_path, tensat):
    """As Caffe2's exports write such weights (the zoo's Inception-v2 ran 6 % slower with them
    stored as initializers); a weight of different values stays an initializer."""
    from eqdsl.onnx.runtime import compare
    from eqdsl.onnx.write import interface_of, write_program

    n = helper.make_node
    inits = [numpy_helper.from_array(np.full((8, 3, 3, 3), 0.02, np.float32), "w"),
             numpy_helper.from_array(np.arange(8, dtype=np.float32), "b")]
    graph = helper.make_graph([n("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3])], "filled",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 6, 6])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    imported = read_onnx(tmp_path / "m.onnx", tensat)
    write_program(tensat, imported.program, imported.weights, tmp_path / "out.onnx", interface_of(tmp_path / "m.onnx"))
    out = onnx.load(str(tmp_path / "out.onnx"))
    filled = [node for node in out.graph.node if node.op_type == "ConstantOfShape"]
    assert [list(node.output) for node in filled] == [["w"]]
    assert "w" not in {t.name for t in out.graph.initializer}
    assert any(t.name.startswith("b") or t.dims == [8] or list(t.dims) == [1, 8, 1, 1]
               for t in out.graph.initializer)  # the bias, of different values, stays an initializer
    assert compare(tmp_path / "m.onnx", tmp_path / "out.onnx", runs=1).ok


@pytest.mark.parametrize("device, message", [
    ("gpu", "expected one of: cpu, cuda, got 'gpu'"),
    ("cuda", "cuda needs onnxruntime-gpu and a CUDA GPU), got 'cuda'"),
])
def test_the_runtime_check_device_is_checked_before_the_run(tmp_path, run_cli, device, message):
    """`export: {device: cuda}` times on ONNX Runtime's CUDA provider; without onnxruntime-gpu (CI,
    this machine) the config is refused up front (exit 2), naming the YAML path."""
    import onnxruntime as ort

    if device == "cuda" and "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this ONNX Runtime has the CUDA provider")
    code, _, text = _run(tmp_path, run_cli, operand_model(), "{onnx: m.onnx}", f"{{format: onnx, device: {device}}}")
    assert code == 2 and "run.yaml: export.device: error" in text and message in text and "Traceback" not in text


def test_a_bound_run_gives_the_outputs_a_plain_run_gives(tmp_path):
    """The timing path off the CPU (inputs and outputs bound once, IOBinding), exercised on the CPU
    device: it computes what `run` computes."""
    from eqdsl.onnx.runtime import bound_run, random_feeds, session

    onnx.save(operand_model(), tmp_path / "m.onnx")
    s = session(tmp_path / "m.onnx", 1)
    feeds = random_feeds(s, 0)
    run = bound_run(s, feeds, "cpu")
    run()
    binding = s.io_binding()
    for i in s.get_inputs():
        binding.bind_cpu_input(i.name, feeds[i.name])
    for o in s.get_outputs():
        binding.bind_output(o.name, "cpu")
    s.run_with_iobinding(binding)
    assert all(np.array_equal(a, b) for a, b in zip(s.run(None, feeds), binding.copy_outputs_to_cpu()))


def test_an_unchanged_model_written_with_its_own_operators_is_not_timed(tmp_path, run_cli, monkeypatch):
    """No rewrite won and eqdsl's writing of the model holds its operators: ONNX Runtime times
    nothing (it could only measure noise), your file is handed back and the summary says why."""
    import eqdsl.exports.onnx as export

    def timed(*args, **kwargs):
        raise AssertionError("timed")

    monkeypatch.setattr(export, "compare_many", timed)
    code, report, text = _run(tmp_path, run_cli, operand_model(), "{onnx: m.onnx}")
    assert code == 0, text
    runtime = report["export"]["runtime"]
    assert report["export"]["unchanged"] and runtime["untimed"] and runtime["handed_back"] == "input"
    assert (tmp_path / "out" / "optimized.onnx").read_bytes() == (tmp_path / "m.onnx").read_bytes()
    assert (tmp_path / "out" / "written.onnx").exists() and "not timed" in text
