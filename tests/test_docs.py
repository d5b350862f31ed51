"""The README teaches in at most 300 lines and the reference is in docs/: every link, every repo
file and every `eqdsl` command they name exists, and the Python API example runs as written."""
from __future__ import annotations

import os
import re
import shutil
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


def test_the_python_api_examples_run_as_written(tmp_path):
    """Both examples of docs/python-api.md, in a folder holding `examples/first/` (the first one
    writes report.html where it runs)."""
    shutil.copytree(ROOT / "examples" / "first", tmp_path / "examples" / "first")
    page = (ROOT / "docs" / "python-api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 2
    for code, starts in zip(blocks, ("4202504.0 -> 270336.0 optimal", "4202504.0 -> 270336.0")):
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.startswith(starts)
    assert "<svg" in (tmp_path / "report.html").read_text()


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


# the `--json` schemas of docs/configuration.md: key → type (a tuple: any of them; a dict: an object;
# a list of one schema: a list of such); `None` in a tuple: may be null
DIAGNOSTIC = {"level": str, "message": str}
SCHEMAS = {
    "check": {"ok": bool, "language": str, "sorts": int, "operators": int,
              "rules": [{"name": str, "multi": bool, "at": str}], "diagnostics": [DIAGNOSTIC]},
    "verify": {"passed": int, "total": int, "seed": int, "not_verified": [str],
               "rules": [{"name": str, "status": str, "examples": int, "seconds": float,
                          "counterexample": (dict, type(None))}]},
    "derive": {"derived": int, "total": int, "rules": [{"name": str, "verdict": str}]},
    "run": {"ok": bool, "language": str, "program": str, "original_cost": float, "best_cost": float,
            "improvement_pct": float, "extractor": {"method": str, "status": str, "bound": (float, type(None)),
                                                    "gap": (float, type(None))},
            "stages": dict, "optimized_program": str, "output": str, "report": str},
}


def _matches(value, schema, where: str = "") -> list[str]:
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return [f"{where}: expected an object"]
        missing = [f"{where}.{k}: missing" for k in schema if k not in value]
        return missing + [p for k, s in schema.items() if k in value for p in _matches(value[k], s, f"{where}.{k}")]
    if isinstance(schema, list):
        if not isinstance(value, list):
            return [f"{where}: expected a list"]
        return [p for i, v in enumerate(value) for p in _matches(v, schema[0], f"{where}[{i}]")]
    kinds = schema if isinstance(schema, tuple) else (schema,)
    return [] if any(_is(value, k) for k in kinds) else [f"{where}: expected {schema}, found {value!r}"]


def _is(value, kind: type) -> bool:
    """JSON's types: a number is a float where a float is expected; a bool is no number."""
    if isinstance(value, bool):
        return kind is bool
    return isinstance(value, (int, float)) if kind is float else isinstance(value, kind)


def test_every_json_output_meets_its_documented_schema(tmp_path, run_cli):
    import json

    first = ROOT / "examples" / "first"
    code, out, _ = run_cli("check", first / "mats.eqr", "--json")
    assert code == 0 and _matches(json.loads(out), SCHEMAS["check"]) == []
    code, out, _ = run_cli("verify", ROOT / "rulesets" / "arith.eqr", "--json", "--examples", "20")
    assert code == 0 and _matches(json.loads(out), SCHEMAS["verify"]) == []
    code, out, _ = run_cli("derive", "arith", "arith", "--json")
    assert code == 0 and _matches(json.loads(out), SCHEMAS["derive"]) == [] and json.loads(out)["derived"] == 7
    code, out, err = run_cli("run", ROOT / "examples" / "arith" / "config.yaml", "--json", "--quiet",
                             "--output", tmp_path / "out")
    assert code == 0, err
    found = json.loads(out)
    assert _matches(found, SCHEMAS["run"]) == [] and found["best_cost"] == 0 and found["stages"] == {"validation": True}
    assert _matches({**found, "ok": "yes"}, SCHEMAS["run"]) == [".ok: expected <class 'bool'>, found 'yes'"]
