"""The graph executor: programs run end to end on eqdsl's kernels agree with the reference
semantics (CPU here; CUDA on the simulator in a subprocess, and with `-m gpu` on a real GPU), and
`eqdsl execute` compares the input and the optimized program."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from eqdsl.execute.executor import Executor, input_feeds
from eqdsl.frontend import load_language
from eqdsl.languages.tensat.models import build_model
from eqdsl.onnx.weights import random_weights
from eqdsl.verify.semantics import evaluate_program, load_semantics

from conftest import ROOT

PROGRAMS = {"squeezenet": dict(size=48), "bert": dict(seq=8, hidden=32, heads=4, layers=2),
            "mobilenetv2": dict(size=32), "vit_base": dict(size=32, hidden=48, heads=4, layers=1),
            "nasrnn": dict(steps=2, hidden=16)}


def tiny_cnn(lang):
    """Every kernel the simulator can afford: conv (fused act, groups, stride), pools, element-wise
    with broadcasting, batch norm, concat, a reshape (a view) and a matmul head."""
    from eqdsl.languages.tensat.nets import Net

    n = Net(lang)
    x = n.input("x", [1, 2, 6, 6])
    a = n.conv(x, 4, (3, 3))
    b = n.g.conv2d(2, 2, 0, 3, n.conv(x, 4, (1, 1), groups=2), n.weight([4, 4, 3, 3]))
    y = n.batchnorm(n.add(n.maxpool(a, 2, 2), n.weight([1, 4, 1, 1])))
    y = n.concat(1, [y, n.g.ewmul(b, b)])
    y = n.avgpool(y, 3, 3, 1)
    return n.program("tiny", [n.matmul(n.g.reshape(y, [1, 8]), 3)])


def disagreements(device: str, names) -> list[str]:
    lang = load_language("tensat")
    sem = load_semantics(lang)
    bad = []
    for name in names:
        program = tiny_cnn(lang) if name == "tiny" else build_model(lang, name, **PROGRAMS[name])
        weights = random_weights(program)
        feeds = input_feeds(program, 0)
        got = Executor(lang, program, weights, device).run(feeds)
        values = {**weights, **feeds}  # weight ids and input names do not collide in the builders
        leaf = lambda n, v=values: v[n.args[0]].astype(np.float64)  # noqa: E731
        for w, g in zip(evaluate_program(program, sem, 0, leaf), got):
            if g.shape != w.shape or np.max(np.abs(w - g)) > 1e-4 * max(1.0, np.max(np.abs(w))):
                bad.append(name)
    return bad


@pytest.mark.parametrize("name", sorted(PROGRAMS) + ["tiny"])
def test_cpu_executor_computes_the_reference_semantics(name):
    assert disagreements("cpu", [name]) == []


def test_a_wrong_kernel_is_caught(monkeypatch):
    from eqdsl.kernels import cpu

    monkeypatch.setitem(cpu.RUNNERS, "relu", lambda a: np.abs(a))
    assert disagreements("cpu", ["squeezenet"]) == ["squeezenet"]


def test_an_operator_without_kernel_runs_on_the_reference_semantics(monkeypatch):
    from eqdsl.kernels import cpu

    monkeypatch.delitem(cpu.RUNNERS, "concat")
    assert disagreements("cpu", ["tiny"]) == []
    lang = load_language("tensat")
    program = tiny_cnn(lang)
    executor = Executor(lang, program, random_weights(program), "cpu")
    executor.run(input_feeds(program, 0))
    assert executor.fallback_ops == {"concat"}


def test_inputs_are_halved_until_the_outputs_are_finite():
    from eqdsl.onnx.runtime import halved_until_finite

    class Overflowing:  # an input program that overflows float32 unless its inputs are below 0.3
        def run(self, feeds):
            return [np.where(np.abs(feeds["x"]) < 0.3, feeds["x"], np.inf)]

    feeds, scale, outputs = halved_until_finite(Overflowing().run, {"x": np.array([1.0, -2.0], np.float32)})
    assert scale == 1 / 8 and np.array_equal(feeds["x"], [0.125, -0.25]) and np.all(np.isfinite(outputs[0]))


def _cuda_subprocess(env) -> subprocess.CompletedProcess:
    code = ("import sys; sys.path.insert(0, 'tests'); from test_executor import disagreements; "
            "bad = disagreements('cuda', ['tiny']); print('ok' if not bad else bad)")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)


def test_cuda_executor_on_the_simulator():
    done = _cuda_subprocess(dict(os.environ, NUMBA_ENABLE_CUDASIM="1"))
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.gpu
def test_cuda_executor_on_the_gpu():
    done = _cuda_subprocess({k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"})
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout[-2000:] + done.stderr[-2000:]


def test_execute_command_compares_input_and_optimized(tmp_path, run_cli):
    (tmp_path / "run.yaml").write_text(
        "ruleset: tensat\ntarget: cpu\nprogram: {builder: squeezenet, size: 48}\n"
        "schedule: {iter_limit: 3, node_limit: 5000, cycle_filter: efficient}\nextract: {method: cpsat}\n"
        "execute: {runs: 3, seed: 7}\n")
    code, out, err = run_cli("execute", tmp_path / "run.yaml", "--runs", "2", "--output", tmp_path / "out", "--quiet")
    assert code == 0, out + err
    execution = json.loads((tmp_path / "out" / "report.json").read_text())["execution"]
    # the flag over the config's runs; the config's seed kept (it was dropped once)
    assert execution["ok"] and execution["device"] == "cpu" and execution["runs"] == 2 and execution["seed"] == 7
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["config"]["execute"] == {"runs": 3, "seed": 7}  # as read; and as it ran:
    assert report["effective_config"]["execute"] == {"device": "cpu", "runs": 2, "seed": 7}
    assert report["effective_config"]["schedule"]["kind"] == "saturate"
    assert report["effective_config"]["schedule"]["iter_limit"] == 3
    assert execution["original_ms"] > 0 and execution["reference_semantics_ops"] == []
    assert "executed with eqdsl's cpu kernels: outputs agree" in out


def test_execute_section_is_validated(tmp_path):
    from eqdsl.config import parse_config
    from eqdsl.diagnostics import EqdslError

    with pytest.raises(EqdslError, match="execute.device"):
        parse_config({"ruleset": "tensat", "execute": {"device": "tpu"}}, tmp_path / "c.yaml")


def test_doctor_reports_packages_and_cuda(run_cli):
    code, out, err = run_cli("doctor")
    assert code == 0, err
    assert "onnxruntime" in out and "numba threading layer  workqueue" in out and "CUDA" in out


def test_execute_refuses_a_language_without_kernels_before_optimizing(tmp_path, run_cli):
    """Issue 46 item 6: `execute` on examples/arith was KeyError 'var' after the whole run."""
    code, _, err = run_cli("execute", "examples/arith/config.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 2 and "eqdsl's executor runs the tensor language's operators" in err and "'var'" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_execute_on_cuda_without_a_gpu_is_one_clear_error(tmp_path, run_cli):
    from numba import cuda

    if cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, _, err = run_cli("execute", "examples/onnx/config.yaml", "--device", "cuda", "--output", tmp_path / "out",
                           "--quiet")
    assert code == 2 and "cuda needs a CUDA GPU and driver" in err and "Traceback" not in err
