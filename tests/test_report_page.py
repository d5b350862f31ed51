"""The report page: one self-contained HTML file per run, written beside report.json, never over a
user's file; drawn by a real headless browser in the slow test."""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLES, run_let_chain


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


BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
# measures, in the browser, every box's label against its box (the page itself has no script)
PROBE = """<script>
const clipped = [];
document.querySelectorAll("svg g").forEach(g => {
  const box = g.querySelector("rect"), text = g.querySelector("text");
  if (box && text && text.getComputedTextLength() > box.width.baseVal.value - 4) clipped.push(text.textContent);
});
document.body.setAttribute("data-clipped", JSON.stringify(clipped));
document.body.setAttribute("data-boxes", document.querySelectorAll("svg g rect").length);
</script>"""


def _browser(*args: str) -> subprocess.CompletedProcess:
    # output to files, not pipes: the browser's helper processes keep a pipe open after it exits
    return subprocess.run([BROWSER or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                           *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


@pytest.mark.skipif(BROWSER is None, reason="no headless browser (apt install chromium; .ci/run installs it)")
def test_the_page_of_a_1500_node_real_model_is_drawn_legibly_at_1400_px(tmp_path, run_cli):
    """The ONNX zoo's DenseNet-121 (1,521 program nodes) imported as shipped: its graphs are drawn,
    and in Chromium at 1400 px no box's label is wider than its box."""
    import onnx

    model = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_densenet121.onnx"
    (tmp_path / "c.yaml").write_text(f"ruleset: fusions\ntarget: cpu\nprogram: {{onnx: {model}}}\n"
                                     "schedule: {iter_limit: 2, node_limit: 20000}\nextract: {method: greedy}\n"
                                     "export: false\nreport: html\noutput: out\n")
    code, _, err = run_cli("run", tmp_path / "c.yaml", "--quiet")
    assert code == 0, err
    page = (tmp_path / "out" / "report.html").read_text()
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert len(report["programs"]["input"]["nodes"]) > 1000 and "not drawn" not in page
    shot = tmp_path / "page.png"
    assert _browser(f"--screenshot={shot}", (tmp_path / "out" / "report.html").as_uri()).returncode == 0
    assert shot.stat().st_size > 10_000
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", PROBE + "</body>"))
    dom = tmp_path / "dom.html"
    with open(dom, "w") as out:
        subprocess.run([BROWSER or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                        "--dump-dom", probe.as_uri()], stdout=out, stderr=subprocess.DEVNULL, timeout=120)
    body = re.search(r"<body data-clipped=\"([^\"]*)\" data-boxes=\"(\d+)\"", dom.read_text())
    assert body is not None and int(body.group(2)) == page.count("<rect ") > 20  # the browser drew every box
    assert json.loads(html.unescape(body.group(1))) == []  # no label clipped


def test_the_diff_colours_only_the_rewritten_region():
    from eqdsl.report_graph import GONE, KEPT, NEW, SAME, diff

    def program(ops: list[str]) -> dict:  # a chain over var("x"): ops[0] applied last
        nodes = [{"op": "var", "args": ["x"]}]
        for op in reversed(ops):
            nodes.append({"op": op, "args": [{"node": len(nodes) - 1}]})
        return {"nodes": nodes, "roots": [len(nodes) - 1]}

    before, after = diff(program(["f", "g", "h", "k"]), program(["f", "g", "h2", "k"]))
    assert before == [SAME, SAME, GONE, KEPT, KEPT]  # x, k: both; h: rewritten; g, f: kept above it
    assert after == [SAME, SAME, NEW, KEPT, KEPT]


def _chain(length: int) -> dict:
    nodes = [{"op": "var", "args": ["a"]}] + [{"op": "shl", "args": [{"node": i}, 0]} for i in range(length)]
    return {"nodes": nodes, "roots": [length]}


def test_a_3000_deep_program_publishes_its_results_and_its_page(tmp_path, run_cli):
    """The page's term keys were nested tuples: RecursionError past ~1,000 levels, and the run
    published nothing."""
    code, _, err = run_let_chain(tmp_path, run_cli, "shl({prev}, 0)", 3000,
                                 "schedule: {iter_limit: 2}\nextract: {method: greedy}\nreport: html\noutput: out\n")
    assert code == 0, err
    page = (tmp_path / "out" / "report.html").read_text()
    assert page.count("<rect ") <= 4 and "shl…shl (" in page  # each program's chain drawn as one box


def test_the_page_of_a_100000_node_program_is_made(tmp_path):
    """Term keys hashed in time quadratic in depth: 24.7 s at 20,000 nodes (benchmarks/trust.py times 100,000)."""
    from eqdsl.report_page import page

    text = page({"best_cost": 0, "programs": {"input": _chain(100_000), "optimized": _chain(99_999)}})
    assert "not drawn" not in text and text.count("<rect ") == 4  # per program: its top (kept), the chain below


@pytest.mark.parametrize("programs, where", [
    ({"input": {"nodes": [{"op": "x", "args": [{"node": 5}]}], "roots": [0]}}, "programs.input.nodes[0].args[0]"),
    ({"input": {"nodes": [{"op": "x", "args": [{"node": 0}]}], "roots": [0]}}, "programs.input.nodes[0].args[0]"),
    ({"input": {"nodes": [{"op": 3, "args": []}], "roots": [0]}}, "programs.input.nodes[0]"),
    ({"input": {"nodes": [{"op": "x", "args": []}], "roots": [4]}}, "programs.input.roots[0]"),
    ({"input": {"nodes": "many", "roots": []}}, "programs.input"),
    ([1, 2], "programs"),
])
def test_eqdsl_report_on_an_edited_report_json_says_what_is_wrong(tmp_path, run_cli, programs, where):
    """Dangling, cyclic and mistyped nodes ended in IndexError / ValueError tracebacks."""
    out = _run(tmp_path, run_cli)
    report = json.loads((out / "report.json").read_text())
    report["programs"] = programs
    (out / "report.json").write_text(json.dumps(report))
    code, _, err = run_cli("report", out)
    assert code == 2 and where in err and "Traceback" not in err
    report["programs"], report["schedule"] = {}, "not an object"
    (out / "report.json").write_text(json.dumps(report))
    code, _, err = run_cli("report", out)
    assert code == 2 and "not as `eqdsl run` writes it" in err and "Traceback" not in err


@pytest.mark.parametrize("handed_back, says", [("input", "your input model, unchanged"),
                                               ("optimized", "the optimized model")])
def test_the_page_says_what_the_export_handed_back_and_on_what_measurement(handed_back, says):
    from eqdsl.report_page import page

    runtime = {"ok": True, "speedup": {"1": 1.0312345, "2": 0.98}, "predicted_speedup": 1.0004,
               "ratio_interval_1_thread": [0.904, 1.179], "handed_back": handed_back}
    text = page({"language": "l", "program": "p", "export": {"runtime": runtime}})
    assert f"Handed back as optimized.onnx: <b>{says}" in text and "[0.904, 1.179] (95 %)" in text
    assert "<td>1.031×</td>" in text and "1.0312345" not in text  # speed-ups to three decimals


def test_a_rule_column_shows_the_rules_text(tmp_path, run_cli):
    code, out, err = run_cli("run", EXAMPLES / "arith" / "config.yaml", "--output", tmp_path / "o", "--quiet",
                             "--set", "report=html")
    assert code == 0, out + err
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["rule_text"]["div-self"] == "rule div-self:  div(num(?n), num(?n)) => num(1)  if ?n != 0"
    assert '<abbr title="rule div-self:  div(num(?n), num(?n)) =&gt; num(1)  if ?n != 0">div-self</abbr>' in \
        (tmp_path / "o" / "report.html").read_text()


def test_a_chart_of_one_cp_sat_round_shows_its_point_on_a_sensible_axis():
    from eqdsl.report_page import _line_chart

    svg = _line_chart({"cost": [(0.1808, 100.0)], "bound": [(0.1808, 90.0)]}, "seconds", "cost")
    assert "seconds (0 to 0.181)" in svg and "-0.8192" not in svg and svg.count("<circle") == 2
