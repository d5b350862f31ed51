"""The README teaches in at most 300 lines and the reference is in docs/: every link, every repo
file and every `eqdsl` command they name exists, and the Python API example runs as written."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
REPO_PATH = re.compile(r"(?<![\w./-])((?:examples|rulesets|benchmarks|targets|tests|docs|eqdsl|grammars|bin)/"
                       r"[\w./-]*[\w])")


def test_the_readme_fits_in_300_lines_and_links_every_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    assert {f"docs/{p.name}" for p in PAGES[1:]} <= set(re.findall(r"\]\((docs/[\w-]+\.md)\)", readme))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_repo_path_and_link_a_page_names_exists(page):
    text = page.read_text()
    base = page.parent
    links = [base / target for target in re.findall(r"\]\(([^)#:]+)\)", text)]
    paths = [ROOT / p for p in REPO_PATH.findall(text) if "*" not in p and "<" not in p]
    missing = sorted({str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)
                      for p in links + paths if not p.exists()})
    assert missing == []


def test_every_eqdsl_command_a_page_names_is_one():
    """Commands as written in code: `` `eqdsl verify ...` `` or `.venv/bin/eqdsl run ...`."""
    from eqdsl.cli import build_parser

    commands = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    named = {m for page in PAGES for m in re.findall(r"(?:`|bin/)eqdsl ([a-z]+)", page.read_text())}
    assert {"optimize", "synthesize", "fmt"} <= named and named - commands == set()


def test_the_python_api_example_runs_as_written():
    page = (ROOT / "docs" / "python-api.md").read_text()
    code = re.search(r"```python\n(.*?)```", page, re.S)[1]
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("4202504.0 -> 270336.0")


def test_the_first_language_does_what_the_readme_says(tmp_path, run_cli):
    first = ROOT / "examples" / "first"
    code, out, _ = run_cli("check", first / "mats.eqr")
    assert code == 0 and "ok: language mats: 1 sort(s), 6 operator(s), 5 rule(s) (4 single, 1 multi)" in out
    code, out, _ = run_cli("verify", first / "mats.eqr", "--examples", "30")
    assert code == 0 and "10/10 rules (operator checks op:* included) passed" in out
    code, out, err = run_cli("run", first / "config.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 0, out + err
    assert "original cost 4,202,504 → best 270,336 (93.57 % cheaper, cpsat, optimal)" in out
    (tmp_path / "bad.eqr").write_text((first / "mats.eqr").read_text() + "rule flip: matmul(?a, ?b) => matmul(?b, ?a)\n")
    code, _, err = run_cli("check", tmp_path / "bad.eqr")
    assert code == 2 and "rule flip unions terms of different shapes" in err


def test_check_and_verify_speak_json_for_scripts(tmp_path, run_cli):
    import json

    first = ROOT / "examples" / "first"
    code, out, _ = run_cli("check", first / "mats.eqr", "--json")
    checked = json.loads(out)
    assert code == 0 and checked["ok"] and [r["name"] for r in checked["rules"]][-1] == "merge-matmuls"
    (tmp_path / "bad.eqr").write_text((first / "mats.eqr").read_text() + "rule flip: matmul(?a, ?b) => matmul(?b, ?a)\n")
    code, out, _ = run_cli("check", tmp_path / "bad.eqr", "--json")
    refused = json.loads(out)
    assert code == 2 and not refused["ok"] and refused["diagnostics"][0]["line"] == 30  # the added line
    (tmp_path / "bad_ref.py").write_text((first / "mats_ref.py").read_text())
    (tmp_path / "bad.eqr").write_text((first / "mats.eqr").read_text()
                                      + "rule comm: matmul(?a, ?b) => matmul(?b, ?a) if shape(?a) == shape(?b)\n")
    code, out, _ = run_cli("verify", tmp_path / "bad.eqr", "--rule", "comm", "--json")
    verdict = json.loads(out)
    assert code == 1 and verdict["passed"] == 0 and verdict["rules"][0]["status"] == "FAIL"
    assert verdict["rules"][0]["counterexample"]["message"] == "left and right sides differ"
