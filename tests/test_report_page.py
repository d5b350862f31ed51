"""The report page: one self-contained HTML file per run, written beside report.json, never over a
user's file; drawn by a real headless browser in the slow test."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from conftest import EXAMPLES


def _run(tmp_path, run_cli, extra: str = "") -> object:
    for name in ("sharing.eqr", "sharing_ref.py", "input.eqr"):
        shutil.copy(EXAMPLES / "sharing" / name, tmp_path / name)
    config = (EXAMPLES / "sharing" / "config.yaml").read_text()
    (tmp_path / "c.yaml").write_text(re.sub(r"(?m)^output:.*$", "output: out", config) + extra)
    code, _, err = run_cli("run", tmp_path / "c.yaml", "--quiet")
    assert code == 0, err
    return tmp_path / "out"


def test_a_run_with_report_html_writes_one_self_contained_page(tmp_path, run_cli):
    out = _run(tmp_path, run_cli, "report: html\n")
    page = (out / "report.html").read_text()
    report = json.loads((out / "report.json").read_text())
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    for section in ("Programs", "Cost by operator", "Exploration", "Extraction"):
        assert f"<h2>{section}</h2>" in page
    nodes = len(report["programs"]["input"]["nodes"]) + len(report["programs"]["optimized"]["nodes"])
    assert page.count("<rect ") == nodes  # every node of both programs drawn
    assert "only in the optimized program" in page and "8,588,608" in page  # the input's cost, readable


def test_eqdsl_report_adds_the_page_to_a_finished_run_and_never_replaces_a_users_file(tmp_path, run_cli):
    out = _run(tmp_path, run_cli)
    assert not (out / "report.html").exists()
    code, printed, err = run_cli("report", out)
    assert code == 0 and (out / "report.html").is_file() and "report.html" in (out / ".eqdsl-output").read_text()
    code, _, err = run_cli("report", out)  # eqdsl's own page: replaced
    assert code == 0, err
    (out / "report.html").unlink()
    (out / "report.html").write_text("my notes")
    (out / ".eqdsl-output").write_text((out / ".eqdsl-output").read_text().replace("report.html\n", ""))
    code, _, err = run_cli("report", out)
    assert code == 2 and "not a file eqdsl wrote" in err and (out / "report.html").read_text() == "my notes"
    code, _, err = run_cli("report", tmp_path)
    assert code == 2 and "expected the report.json of an `eqdsl run`" in err


@pytest.mark.slow
def test_a_headless_browser_draws_the_page(tmp_path, run_cli):
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no headless browser (apt install chromium)")
    out = _run(tmp_path, run_cli, "report: html\n")
    shot, dom_file = tmp_path / "page.png", tmp_path / "dom.html"
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu"]
    # output to files, not pipes: the browser's helper processes keep a pipe open after it exits
    done = subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1200,1600", (out / "report.html").as_uri()],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    assert done.returncode == 0 and shot.stat().st_size > 10_000
    with open(dom_file, "w") as dom_out:
        subprocess.run([*flags, "--dump-dom", (out / "report.html").as_uri()], stdout=dom_out,
                       stderr=subprocess.DEVNULL, timeout=120)
    dom = dom_file.read_text()
    assert dom.count("<rect ") == (out / "report.html").read_text().count("<rect ")  # the browser parsed every node
