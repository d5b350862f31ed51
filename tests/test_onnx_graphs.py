"""Graphs real exporters write beyond one float tensor per operator (issue 44): bool masks and
int64 tensors between opaque nodes (BERT's IsNaN → Where, T5's position buckets), operators with
more than three inputs and several outputs (LSTM), If on a condition the static shapes decide
(silero-vad), non-float inputs, and the model's interface (input and output names) kept."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from eqdsl.frontend import load_language
from eqdsl.onnx.read import read_onnx
from eqdsl.onnx.write import to_onnx

n = helper.make_node


@pytest.fixture(scope="module")
def tensat():
    return load_language("tensat")


def _model(nodes, inputs, outputs, inits=(), opset=18) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _f(name: str, dims) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def _run(tmp_path, run_cli, model: onnx.ModelProto, extra: str = "", export: str = "onnx") -> tuple[int, dict, str]:
    onnx.save(model, tmp_path / "m.onnx")
    (tmp_path / "run.yaml").write_text(
        f"ruleset: tensat\ntarget: t4\nprogram: {{onnx: m.onnx{extra}}}\nschedule: {{iter_limit: 2, node_limit: 3000}}\n"
        f"extract: {{method: greedy-dag, compare: []}}\nvalidate: {{samples: 1}}\nexport: {export}\n")
    code, out, err = run_cli("run", tmp_path / "run.yaml", "--output", tmp_path / "out", "--quiet")
    report = json.loads((tmp_path / "out" / "report.json").read_text()) if code in (0, 1) else {}
    return code, report, out + err


def mask_model() -> onnx.ModelProto:
    """Softmax → IsNaN → Where(mask, 0, p) (PyTorch's SDPA export), and a T5-style bucket: a float
    constant cast to int64 indexes a table (Gather) that is added to the scores."""
    rng = np.random.default_rng(0)
    nodes = [n("MatMul", ["x", "w"], ["s"]), n("Cast", ["pos"], ["bucket"], to=TensorProto.INT64),
             n("Gather", ["table", "bucket"], ["bias"], axis=0), n("Add", ["s", "bias"], ["sb"]),
             n("Softmax", ["sb"], ["p"], axis=-1), n("IsNaN", ["p"], ["nan"]), n("Where", ["nan", "zero", "p"], ["y"])]
    inits = [numpy_helper.from_array(rng.normal(size=(8, 8)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([0.0, 1.4, 2.6, 1.2, 0.1, 3.9, 2.2, 0.5], np.float32), "pos"),
             numpy_helper.from_array(rng.normal(size=(4,)).astype(np.float32), "table"),
             numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    return _model(nodes, [_f("x", [2, 8])], [_f("y", [2, 8])], inits)


def test_bool_masks_flow_between_opaque_nodes_and_constant_int_chains_fold(tmp_path, tensat, run_cli):
    onnx.save(mask_model(), tmp_path / "m.onnx")
    imported = read_onnx(tmp_path / "m.onnx", tensat)
    keys = [str(x.args[0]).split("(")[0] for x in imported.program.nodes if x.op.startswith("opaque")]
    assert sorted(keys) == ["IsNaN", "Softmax", "Where"]  # Cast and Gather of constants were computed
    code, report, text = _run(tmp_path, run_cli, mask_model())
    assert code == 0 and report["validation"]["ok"] and report["export"]["ok"], text


def lstm_model() -> onnx.ModelProto:
    """An LSTM (6 tensor inputs, an omitted one) whose Y_h and Y_c both leave the graph."""
    rng = np.random.default_rng(1)
    hidden, size = 4, 3
    nodes = [n("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["", "yh", "yc"], hidden_size=hidden),
             n("Relu", ["yh"], ["h"])]
    inits = [numpy_helper.from_array(rng.normal(size=s).astype(np.float32) / 3, name)
             for name, s in (("W", (1, 4 * hidden, size)), ("R", (1, 4 * hidden, hidden)), ("B", (1, 8 * hidden)))]
    return _model(nodes, [_f("x", [2, 1, size]), _f("h0", [1, 1, hidden]), _f("c0", [1, 1, hidden])],
                  [_f("h", [1, 1, hidden]), _f("yc", [1, 1, hidden])], inits)


def test_an_operator_with_six_inputs_and_three_outputs_is_one_node_again(tmp_path, tensat, run_cli):
    onnx.save(lstm_model(), tmp_path / "m.onnx")
    imported = read_onnx(tmp_path / "m.onnx", tensat)
    assert [x.op for x in imported.program.nodes].count("opaque6") == 2  # Y_h and Y_c
    code, report, text = _run(tmp_path, run_cli, lstm_model())
    assert code == 0 and report["validation"]["ok"] and report["export"]["ok"], text
    out = onnx.load(str(tmp_path / "out" / "optimized.onnx"))
    assert [x.op_type for x in out.graph.node].count("LSTM") == 1
    assert [o.name for o in out.graph.output] == ["h", "yc"] and [i.name for i in out.graph.input] == ["x", "h0", "c0"]


def if_model(rows: int) -> onnx.ModelProto:
    """silero-vad's pattern: If (the input's first dim == 1) then … else …."""
    then = helper.make_graph([n("Sigmoid", ["x"], ["t"])], "then", [], [_f("t", None)])
    other = helper.make_graph([n("Relu", ["x"], ["e"])], "else", [], [_f("e", None)])
    nodes = [n("Shape", ["x"], ["shape"]), n("Gather", ["shape", "k0"], ["first"], axis=0),
             n("Equal", ["first", "one"], ["cond"]), n("If", ["cond"], ["y"], then_branch=then, else_branch=other)]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "k0"), numpy_helper.from_array(np.array(1, np.int64), "one")]
    return _model(nodes, [_f("x", [rows, 4])], [_f("y", [rows, 4])], inits)


def test_an_if_the_static_shapes_decide_is_its_taken_branch(tmp_path, tensat):
    onnx.save(if_model(1), tmp_path / "one.onnx")
    onnx.save(if_model(3), tmp_path / "three.onnx")
    ops = lambda p: [str(x.args[0]).split("(")[0] if x.op.startswith("opaque") else x.op  # noqa: E731
                     for x in read_onnx(p, tensat).program.nodes]
    assert ops(tmp_path / "one.onnx") == ["input", "sigmoid"] and ops(tmp_path / "three.onnx") == ["input", "relu"]


def data_if_model() -> onnx.ModelProto:
    """If (Σx > 0) then sigmoid(x²·w) else relu(x) + k: branches read x, x², the weight w and an int64
    constant from the enclosing graph."""
    model = if_model(1)
    graph = model.graph
    then = helper.make_graph([n("MatMul", ["x2", "w"], ["xw"]), n("Sigmoid", ["xw"], ["t"])], "then", [],
                             [_f("t", None)])
    other = helper.make_graph([n("Relu", ["x"], ["r"]), n("Cast", ["k"], ["kf"], to=TensorProto.FLOAT),
                               n("Add", ["r", "kf"], ["e"])], "else", [], [_f("e", None)])
    del graph.node[:]
    graph.node.extend([n("ReduceSum", ["x"], ["total"], keepdims=0), n("Greater", ["total", "zerof"], ["cond"]),
                       n("Mul", ["x", "x"], ["x2"]),
                       n("If", ["cond"], ["y"], then_branch=then, else_branch=other)])
    graph.initializer.extend([numpy_helper.from_array(np.array(0.0, np.float32), "zerof"),
                              numpy_helper.from_array(np.eye(4, dtype=np.float32), "w"),
                              numpy_helper.from_array(np.array(2, np.int64), "k")])
    return model


def test_an_if_on_the_inputs_values_is_one_opaque_node_with_its_captures(tmp_path, tensat, run_cli):
    onnx.save(data_if_model(), tmp_path / "m.onnx")
    imported = read_onnx(tmp_path / "m.onnx", tensat)
    node = next(x for x in imported.program.nodes if str(x.args[0]).startswith("If("))
    assert node.op == "opaque4" and "__captures=['w', 'x', 'x2']" in str(node.args[0])  # cond, then w, x, x²
    code, report, text = _run(tmp_path, run_cli, data_if_model())
    assert code == 0 and report["validation"]["ok"] and report["export"]["ok"], text
    out = onnx.load(str(tmp_path / "out" / "optimized.onnx"))
    assert [x.op_type for x in out.graph.node].count("If") == 1


def sample_rate_model() -> onnx.ModelProto:
    """silero-vad's `sr`: an int64 input read only as `+ Cast(sr * 0)`."""
    nodes = [n("Mul", ["sr", "zero"], ["srz"]), n("Cast", ["srz"], ["srf"], to=TensorProto.FLOAT),
             n("Relu", ["x"], ["r"]), n("Add", ["r", "srf"], ["y"])]
    sr = helper.make_tensor_value_info("sr", TensorProto.INT64, [])
    return _model(nodes, [_f("x", [1, 4]), sr], [_f("y", [1, 4])], [numpy_helper.from_array(np.array(0, np.int64), "zero")])


def test_a_non_float_input_is_fixed_by_constants_and_kept_in_the_interface(tmp_path, run_cli):
    onnx.save(sample_rate_model(), tmp_path / "m.onnx")
    code, out, err = run_cli("import", "onnx", tmp_path / "m.onnx")  # unfixed: a typed input (below)
    assert code == 0 and "input 'sr' is int64: the operators it reaches stay opaque" in err
    assert 'typed_input("sr", [], "int64")' in out
    code, out, err = run_cli("import", "onnx", tmp_path / "m.onnx", "--constant", "sr=16000")
    assert code == 0 and "note: input 'sr' fixed to 16000" in err
    code, report, text = _run(tmp_path, run_cli, sample_rate_model(), ", constants: {sr: 16000}")
    assert code == 0 and report["export"]["ok"] and "input: input 'sr' fixed to 16000" in text, text
    out_model = onnx.load(str(tmp_path / "out" / "optimized.onnx"))
    assert [i.name for i in out_model.graph.input] == ["x", "sr"] and out_model.graph.output[0].name == "y"


def token_model() -> onnx.ModelProto:
    """A text encoder's first layer as users export it: int64 token ids into an embedding Gather,
    an int64 attention mask cast to float, then two MatMul + Relu heads concatenated (TASO's rules
    rewrite those)."""
    rng = np.random.default_rng(0)
    nodes = [n("Gather", ["emb", "ids"], ["e"]), n("Cast", ["mask"], ["mf"], to=TensorProto.FLOAT),
             n("Unsqueeze", ["mf", "axis"], ["mu"]), n("Mul", ["e", "mu"], ["em"]),
             n("MatMul", ["em", "w1"], ["h1"]), n("Relu", ["h1"], ["r1"]),
             n("MatMul", ["em", "w2"], ["h2"]), n("Relu", ["h2"], ["r2"]), n("Concat", ["r1", "r2"], ["y"], axis=1)]
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, [8]) for name in ("ids", "mask")]
    weights = [numpy_helper.from_array(rng.standard_normal((50, 16)).astype(np.float32), "emb"),
               numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "w1"),
               numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "w2"),
               numpy_helper.from_array(np.array([-1], np.int64), "axis")]
    return _model(nodes, inputs, [_f("y", [8, 32])], weights)


def test_integer_token_ids_and_a_mask_are_typed_inputs_validated_and_written_back(tmp_path, tensat, run_cli):
    onnx.save(token_model(), tmp_path / "t.onnx")
    imported = read_onnx(tmp_path / "t.onnx", tensat)
    typed = [x.args for x in imported.program.nodes if x.op == "typed_input"]
    assert typed == [("ids", (8,), "int64"), ("mask", (8,), "int64")]
    written = to_onnx(tensat, imported.program, imported.weights)  # no interface to copy the types from
    assert [(i.name, i.type.tensor_type.elem_type) for i in written.graph.input] == [("ids", TensorProto.INT64),
                                                                                    ("mask", TensorProto.INT64)]
    (tmp_path / "run.yaml").write_text(
        "ruleset: tensat\ntarget: t4\nprogram: {onnx: t.onnx}\nschedule: {iter_limit: 2, node_limit: 3000}\n"
        "extract: {method: greedy-dag, compare: []}\nvalidate: {samples: 1}\nexport: onnx\nexecute: cpu\n")
    code, out, err = run_cli("run", tmp_path / "run.yaml", "--output", tmp_path / "out", "--quiet")
    report, text = json.loads((tmp_path / "out" / "report.json").read_text()) if code == 0 else {}, out + err
    assert code == 0 and report["validation"]["ok"] and report["validation"]["samples"] == 1, text  # not skipped
    assert report["export"]["ok"] and report["execution"]["ok"], text  # ONNX Runtime and eqdsl's kernels agree
    optimized = onnx.load(str(tmp_path / "out" / "optimized.onnx"))
    assert [i.type.tensor_type.elem_type for i in optimized.graph.input] == [TensorProto.INT64] * 2


def test_an_output_an_opaque_operator_computes_keeps_its_element_type(tmp_path, tensat):
    """ArgMax's int64 class ids as an output: the written model declares them int64 (inferred), and
    ONNX Runtime computes the same as on the source model."""
    import onnxruntime as ort

    nodes = [n("Relu", ["x"], ["r"]), n("ArgMax", ["r"], ["y"], axis=1), n("Tanh", ["r"], ["z"])]
    model = _model(nodes, [_f("x", [2, 4])], [helper.make_tensor_value_info("y", TensorProto.INT64, [2, 1]),
                                             _f("z", [2, 4])])
    onnx.save(model, tmp_path / "m.onnx")
    imported = read_onnx(tmp_path / "m.onnx", tensat)
    written = to_onnx(tensat, imported.program, imported.weights)
    assert [o.type.tensor_type.elem_type for o in written.graph.output] == [TensorProto.INT64, TensorProto.FLOAT]
    x = {"x": np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString()).run(None, x)
    got = ort.InferenceSession(written.SerializeToString()).run(None, {k: v for k, v in x.items()})
    assert got[0].dtype == np.int64 and (got[0] == want[0]).all() and np.allclose(got[1], want[1])


def test_quantized_weights_too_large_for_a_key_are_a_weight_of_their_own_type(tmp_path, tensat):
    """MatMulInteger over 90,000 uint8 weights (a quantized model's): refused once ("an opaque
    operator keeps at most 65536 in its key"); now a `weight` that stays uint8 in the written model,
    which ONNX Runtime runs to the source's outputs."""
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    nodes = [n("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]), n("MatMulInteger", ["xq", "w", "xz", "wz"], ["acc"]),
             n("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT), n("Mul", ["accf", "xs"], ["y"])]
    inits = [numpy_helper.from_array(rng.integers(0, 255, (300, 300)).astype(np.uint8), "w"),
             numpy_helper.from_array(np.array(128, np.uint8), "wz")]
    model = _model(nodes, [_f("x", [4, 300])], [_f("y", [4, 300])], inits, opset=17)
    onnx.save(model, tmp_path / "q.onnx")
    imported = read_onnx(tmp_path / "q.onnx", tensat)
    assert imported.weights["w"].dtype == np.uint8 and "wz" not in imported.weights  # 1 value: in the key
    written = to_onnx(tensat, imported.program, imported.weights)
    assert next(t for t in written.graph.initializer if t.name == "w").data_type == TensorProto.UINT8
    x = {"x": rng.standard_normal((4, 300)).astype(np.float32)}
    want, got = (ort.InferenceSession(m.SerializeToString()).run(None, x)[0] for m in (model, written))
    assert np.array_equal(want, got)


def test_an_unused_non_float_input_needs_nothing(tmp_path, tensat):
    model = _model([n("Relu", ["x"], ["y"])], [_f("x", [1, 4]), helper.make_tensor_value_info("mask", TensorProto.BOOL, [1, 4])],
                   [_f("y", [1, 4])])
    onnx.save(model, tmp_path / "m.onnx")
    assert [x.op for x in read_onnx(tmp_path / "m.onnx", tensat).program.nodes] == ["input", "relu"]


def test_a_local_function_is_inlined(tmp_path, tensat):
    """A model-local function (what `torch.onnx.export(..., export_modules_as_functions=True)` writes)."""
    body = onnx.helper.make_function("custom", "ScaledRelu", ["a"], ["b"],
                                     [n("Relu", ["a"], ["r"]), n("Mul", ["r", "r"], ["b"])],
                                     [helper.make_opsetid("", 18)])
    model = _model([n("ScaledRelu", ["x"], ["y"], domain="custom")], [_f("x", [1, 4])], [_f("y", [1, 4])])
    model.opset_import.append(helper.make_opsetid("custom", 1))
    model.functions.append(body)
    onnx.save(model, tmp_path / "m.onnx")
    imported = read_onnx(tmp_path / "m.onnx", tensat)
    assert [x.op for x in imported.program.nodes] == ["input", "relu", "ewmul"]
    assert imported.notes == ("local function(s) ScaledRelu inlined (onnx.inliner)",)


def test_a_custom_domain_operator_is_refused_at_import(tmp_path, run_cli):
    model = _model([n("Foo", ["x"], ["y"], domain="my.custom")], [_f("x", [1, 4])], [_f("y", [1, 4])])
    model.opset_import.append(helper.make_opsetid("my.custom", 1))
    onnx.save(model, tmp_path / "m.onnx")
    code, _, err = run_cli("import", "onnx", tmp_path / "m.onnx")
    assert code == 2 and "(Foo): operator my.custom::Foo is neither ONNX's nor ONNX Runtime's" in err
    assert "Traceback" not in err


def test_a_constant_without_a_language_form_is_computed_whatever_its_size(tmp_path, tensat, monkeypatch):
    """The zoo's Caffe2 exports write weights as ConstantOfShape (AlexNet's fc6: 37.7 M values)."""
    import eqdsl.onnx.reader as reader

    monkeypatch.setattr(reader, "MAX_FOLDED", 4)
    value = numpy_helper.from_array(np.array([0.5], np.float32), "v")
    nodes = [n("ConstantOfShape", ["wshape"], ["w"], value=value), n("MatMul", ["x", "w"], ["y"])]
    model = _model(nodes, [_f("x", [1, 4])], [_f("y", [1, 3])],
                   [numpy_helper.from_array(np.array([4, 3], np.int64), "wshape")])
    onnx.save(model, tmp_path / "m.onnx")
    assert [x.op for x in read_onnx(tmp_path / "m.onnx", tensat).program.nodes] == ["input", "weight", "matmul"]


def test_a_run_that_rewrites_nothing_and_checks_nothing_hands_back_the_users_file(tmp_path, run_cli):
    code, report, text = _run(tmp_path, run_cli, if_model(1), export="{format: onnx, runtime_check: false}")
    assert code == 0 and report["export"]["unchanged"], text
    assert "optimized.onnx is your model, unchanged" in text and not (tmp_path / "out" / "written.onnx").exists()
    assert (tmp_path / "out" / "optimized.onnx").read_bytes() == (tmp_path / "m.onnx").read_bytes()


@pytest.mark.parametrize("interval", [(0.9, 1.2), (0.985, 0.995), (0.7, 0.9)])
def test_an_unchanged_program_is_handed_back_as_written_only_if_that_is_faster(tmp_path, run_cli, monkeypatch,
                                                                               interval):
    """The import's folding (here: the If the static shapes decide) can pay alone: your program as
    eqdsl writes it is timed against your file and handed back only if 1 % faster beyond noise (an
    interval ending at 0.995 is faster beyond noise, by too little to trade your file for)."""
    from pathlib import Path

    import eqdsl.exports.onnx as export
    from eqdsl.onnx.runtime import RuntimeCheck

    def times(original, others, runs, seed, thread_counts=None, fixed=None, shapes=None, device="cpu"):  # runs in the worker process
        assert [Path(o).stem for o in others] == ["written"]  # your file is not timed against itself
        return [RuntimeCheck(True, 0.0, runs, {1: 1.0}, {1: sum(interval) / 2}, "agree", interval)]

    monkeypatch.setattr(export, "compare_many", times)
    code, report, text = _run(tmp_path, run_cli, if_model(1))
    assert code == 0 and report["export"]["unchanged"], text
    handed = (tmp_path / "out" / "optimized.onnx").read_bytes()
    runtime = report["export"]["runtime"]
    if interval[1] < 0.99:
        assert runtime["handed_back"] == "written" and handed == (tmp_path / "out" / "written.onnx").read_bytes()
        assert [node.op_type for node in onnx.load_from_string(handed).graph.node] == ["Sigmoid"]
    else:
        assert runtime["handed_back"] == "input" and handed == (tmp_path / "m.onnx").read_bytes()
        assert "eqdsl's writing of your model is not faster beyond noise" in text
        assert "optimized.onnx is your model, unchanged" in text


def test_same_terms_tells_a_rewritten_program_from_a_renumbered_one(tensat):
    """The hand-back compares terms, not node counts: a bug here handed back the user's file for
    a rewritten program of the same size."""
    from eqdsl.frontend import load_program_text
    from eqdsl.ir.builder import same_terms

    def program(text):
        return load_program_text(f"program p:\n  {text}\n", "<test>", tensat)["p"]

    a = program('let x = input("x", [2, 4])\n  root relu(tanh(x))')
    renumbered = program('let t = tanh(input("x", [2, 4]))\n  root relu(t)')
    rewritten = program('let x = input("x", [2, 4])\n  root tanh(relu(x))')
    assert same_terms(a, renumbered) and not same_terms(a, rewritten)


@pytest.mark.parametrize("dtype, expected", [
    ("foo", "typed_input: element type 'foo'; expected one of: bool,"),
    ("int64", "export onnx: ONNX rejects the written model"),  # relu on int64: not the language's
])
def test_a_typed_input_a_program_misuses_is_a_clean_error(tmp_path, run_cli, dtype, expected):
    (tmp_path / "p.eqr").write_text(f'program main:\n  root relu(typed_input("x", [2, 3], "{dtype}"))\n')
    (tmp_path / "c.yaml").write_text("ruleset: tensat\ntarget: t4\nprogram: p.eqr\nvalidate: true\nexport: onnx\n")
    code, _, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 2 and expected in err and "Traceback" not in err, err
