"""`eqdsl optimize MODEL.onnx -o OUT.onnx`: one command, no config, the model out and nothing else."""
from __future__ import annotations

import json
import shutil

import numpy as np
import onnx

from conftest import EXAMPLES

MODEL = EXAMPLES / "onnx" / "small_cnn.onnx"


def test_optimize_writes_only_the_model_and_ends_with_the_verdict(tmp_path, run_cli):
    code, out, err = run_cli("optimize", MODEL, "-o", tmp_path / "fast.onnx", "--report", tmp_path / "r.json")
    assert code == 0, out + err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fast.onnx", "r.json"]  # no scratch left behind
    lines = out.strip().splitlines()
    assert lines[-1].startswith(f"wrote {tmp_path / 'fast.onnx'}: ") and "with 1 thread" in lines[-1]
    assert any("nodes" in line and "14" in line for line in lines)  # the operator-count table
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["export"]["ok"] and report["validation"]["ok"]
    assert report["effective_config"]["ruleset"] == "fusions" and report["effective_config"]["target"]
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
