"""Every `eqdsl` command line of the README's code blocks runs, in order, as written — in a scratch
copy of the examples, where the Quickstart has run (`make run`) and the README's placeholder
files exist: `model.onnx` (the ONNX example's small CNN), `my.eqr` (a copy of the arith ruleset)
and `config.yaml` (the ONNX example's config, its operator costs measured under ONNX Runtime)."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

from conftest import EXAMPLES, ROOT

COMMAND = re.compile(r"^\.venv/bin/eqdsl (.*?)(?:\s+#.*)?$")
OPTIONAL = re.compile(r"\s*\[[^\]]*\]")  # `[--shape x=1,3,224,224]`: an option shown as optional


def readme_commands() -> list[list[str]]:
    blocks = re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    lines = [m[1] for block in blocks for line in block.splitlines() if (m := COMMAND.match(line.strip()))]
    return [shlex.split(OPTIONAL.sub("", line)) for line in lines]


def _scratch(tmp_path):
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    shutil.copytree(ROOT / "rulesets", tmp_path / "rulesets")
    shutil.copytree(ROOT / "tests" / "data" / "tensat-rules", tmp_path / "tests" / "data" / "tensat-rules")
    shutil.copy(EXAMPLES / "onnx" / "small_cnn.onnx", tmp_path / "model.onnx")
    shutil.copy(ROOT / "rulesets" / "arith.eqr", tmp_path / "my.eqr")
    config = (EXAMPLES / "onnx" / "config.yaml").read_text()
    config = re.sub(r"(?m)^target:.*$", "target: {measure: ort, fallback: cpu, runs: 3}", config)
    config = re.sub(r"(?m)^output:.*$", "output: results/config", config)
    (tmp_path / "config.yaml").write_text(config.replace("small_cnn.onnx", "examples/onnx/small_cnn.onnx"))


def test_every_command_of_the_readme_runs_as_written(tmp_path):
    commands = readme_commands()
    assert len(commands) >= 20 and ["doctor"] in commands
    _scratch(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    quickstart = [["run", f"examples/{name}/config.yaml"] for name in ("arith", "sharing", "onnx")]
    failed = []
    for args in [*quickstart[1:], *commands]:  # arith: the README runs it itself
        done = subprocess.run([sys.executable, "-m", "eqdsl", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        if done.returncode != 0:
            failed.append(f"eqdsl {shlex.join(args)}: exit {done.returncode}: {done.stderr[-400:]}")
    assert failed == []
