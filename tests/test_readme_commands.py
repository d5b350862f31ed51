"""Every `eqdsl` command line of the code blocks of the README and of each page of docs/ runs, in
order, as written — each page's in its own scratch copy of the examples, where the Quickstart has
run (`make run`) and the pages' placeholder files exist: `model.onnx` (the ONNX example's small
CNN), `my.eqr` (a copy of the arith ruleset) and `config.yaml` (the ONNX example's config, its
operator costs measured under ONNX Runtime). Commands named in prose are checked to exist
(`tests/test_docs.py`)."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import EXAMPLES, ROOT

COMMAND = re.compile(r"^\.venv/bin/eqdsl (.*?)(?:\s+#.*)?$")
OPTIONAL = re.compile(r"\s*\[[^\]]*\]")  # `[--shape x=1,3,224,224]`: an option shown as optional


def commands_of(page) -> list[list[str]]:
    blocks = re.findall(r"```(?:sh|bash)\n(.*?)```", page.read_text(), re.S)
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


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_pages_show_commands():
    readme = commands_of(PAGES[0])
    assert len(readme) >= 20 and ["doctor"] in readme
    assert ["optimize", "model.onnx", "-o", "model-fast.onnx"] in commands_of(ROOT / "docs" / "onnx.md")


@pytest.mark.parametrize("page", [p for p in PAGES if commands_of(p)], ids=lambda p: p.name)
def test_every_command_of_a_page_runs_as_written(tmp_path, page):
    commands = commands_of(page)
    _scratch(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    quickstart = [["run", f"examples/{name}/config.yaml"] for name in ("arith", "sharing", "onnx")]
    failed = []
    for args in [*quickstart, *commands]:
        done = subprocess.run([sys.executable, "-m", "eqdsl", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        if done.returncode != 0:
            failed.append(f"eqdsl {shlex.join(args)}: exit {done.returncode}: {done.stderr[-400:]}")
    assert failed == []
