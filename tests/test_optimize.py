"""`eqdsl optimize MODEL.onnx -o OUT.onnx`: one command, no config, the model out and nothing else."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx

from conftest import EXAMPLES

MODEL = EXAMPLES / "onnx" / "small_cnn.onnx"


def test_optimize_writes_only_the_model_and_ends_with_the_verdict(tmp_path, run_cli):
    code, out, err = run_cli("optimize", MODEL, "-o", tmp_path / "fast.onnx", "--report", tmp_path / "r.json")
    assert code == 0, out + err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fast.onnx", "r.json"]  # no scratch left behind
    lines = out.strip().splitlines()
    assert lines[-1].startswith(f"wrote {tmp_path / 'fast.onnx'}: ")
    assert any("nodes" in line and "14" in line for line in lines)  # the operator-count table
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["export"]["ok"] and report["validation"]["ok"]
    assert report["effective_config"]["ruleset"] == "cpu" and report["effective_config"]["target"]
    import onnxruntime as ort

    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    name = onnx.load(str(MODEL)).graph.input[0].name
    want, got = (ort.InferenceSession(str(p)).run(None, {name: x})[0] for p in (MODEL, tmp_path / "fast.onnx"))
    assert np.allclose(want, got, rtol=1e-4, atol=1e-5)


def test_optimize_never_replaces_a_file_without_force(tmp_path, run_cli):
    mine = tmp_path / "fast.onnx"
    mine.write_text("mine")
    code, _, err = run_cli("optimize", MODEL, "-o", mine)
    assert code == 2 and "already exists" in err and mine.read_text() == "mine"
    code, out, err = run_cli("optimize", MODEL, "-o", mine, "--force")
    assert code == 0, out + err
    onnx.checker.check_model(onnx.load(str(mine)))


def test_a_model_given_to_run_or_missing_is_one_clear_error(tmp_path, run_cli):
    shutil.copy(MODEL, tmp_path / "m.onnx")
    code, _, err = run_cli("run", tmp_path / "m.onnx")
    assert code == 2 and "eqdsl optimize" in err and "Traceback" not in err
    code, _, err = run_cli("optimize", tmp_path / "none.onnx", "-o", tmp_path / "o.onnx")
    assert code == 2 and "no such file" in err and not (tmp_path / "o.onnx").exists()
    code, _, err = run_cli("optimize", MODEL, "-o", tmp_path / "o.onnx", "--target", "nosuch")
    assert code == 2 and err.startswith("--target: error: unknown target 'nosuch'") and not (tmp_path / "o.onnx").exists()


def test_a_rewrite_predicted_no_faster_is_handed_back_untimed(tmp_path, run_cli):
    """The zoo's SqueezeNet: the `fusions` rewrite (TASO's rules too) is all but cost-neutral (1.000×), so
    `optimize` hands back the model itself without writing or timing the rewrite (`run` times it by default)."""
    zoo = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"
    code, out, err = run_cli("optimize", zoo, "-o", tmp_path / "same.onnx", "--report", tmp_path / "r.json",
                             "--ruleset", "fusions")
    assert code == 0, out + err
    assert "predicts under 1 % gain from eqdsl's rewrite (1.000×), so it was not timed" in out.strip().splitlines()[-1]
    assert (tmp_path / "same.onnx").read_bytes() == zoo.read_bytes()
    runtime = json.loads((tmp_path / "r.json").read_text())["export"]["runtime"]
    assert runtime["untimed"] and runtime["handed_back"] == "input" and "speedup" not in runtime


def _hardswish_written_out(path: Path) -> None:
    """x * clip(x + 3, 0, 6) / 6, as MobileNetV3's exporters write hard-swish: four kernels that
    `hardswish-fold` makes one (a gain the cost model predicts)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 64, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 64, 64])
    consts = [helper.make_tensor(n, TensorProto.FLOAT, [], [v]) for n, v in (("three", 3.0), ("zero", 0.0),
                                                                           ("six", 6.0))]
    nodes = [helper.make_node("Add", ["x", "three"], ["a"]), helper.make_node("Clip", ["a", "zero", "six"], ["c"]),
             helper.make_node("Mul", ["x", "c"], ["m"]), helper.make_node("Div", ["m", "six"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "hs", [x], [y], consts),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))


def test_a_rewrite_predicted_faster_is_timed_and_the_verdict_says_how_it_measured(tmp_path, run_cli):
    _hardswish_written_out(tmp_path / "hs.onnx")
    code, out, err = run_cli("optimize", tmp_path / "hs.onnx", "-o", tmp_path / "fast.onnx", "--report", tmp_path / "r.json")
    assert code == 0, out + err
    assert "with 1 thread (time ratio in [" in out.strip().splitlines()[-1]
    runtime = json.loads((tmp_path / "r.json").read_text())["export"]["runtime"]
    assert runtime["predicted_speedup"] >= 1.01 and "1" in runtime["speedup"] and not runtime.get("untimed")


def test_an_onnx_runtime_operator_onnx_cannot_shape_is_shaped_by_running_it(tmp_path, run_cli):
    """A `com.microsoft` operator (ONNX's shape inference knows none: a quantized LSTM refused
    ddddocr's model) gets its output's shape from ONNX Runtime, run on two random inputs; the
    model imports, validates and runs."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [16, 4], np.linspace(-1, 1, 64).astype(np.float32))
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("FusedMatMul", ["r", "w"], ["m"], domain="com.microsoft", alpha=0.5),
             helper.make_node("Relu", ["m"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "contrib", [x], [y], [w]), ir_version=8,
                              opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    onnx.save(model, tmp_path / "m.onnx")
    code, out, err = run_cli("optimize", tmp_path / "m.onnx", "-o", tmp_path / "o.onnx", "--report", tmp_path / "r.json")
    assert code == 0 and "Traceback" not in err, out + err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["validation"]["ok"] and report["export"]["runtime"]["ok"]
    assert any("FusedMatMul" in note for note in report["input_notes"])


def test_a_rewrite_that_fails_validation_is_not_handed_back(tmp_path, run_cli, monkeypatch):
    """A rewrite the float64 validation refuses: `-o` gets your model itself, the validation's
    line says how it disagreed, the verdict says what was handed back, exit 1."""
    import eqdsl.stages as stages
    from eqdsl.verify.validate import Validation

    monkeypatch.setattr(stages, "validate", lambda *a, **k: Validation(1, 0.5, False, "programs DISAGREE (test)"))
    _hardswish_written_out(tmp_path / "hs.onnx")
    code, out, err = run_cli("optimize", tmp_path / "hs.onnx", "-o", tmp_path / "o.onnx")
    assert code == 1 and "Traceback" not in err, out + err
    assert "validation: programs DISAGREE (test)" in err
    assert "your model, unchanged: eqdsl's rewrite failed validation" in out.strip().splitlines()[-1]
    assert [n.op_type for n in onnx.load(str(tmp_path / "o.onnx")).graph.node] == ["Add", "Clip", "Mul", "Div"]
