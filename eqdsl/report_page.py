"""One self-contained HTML page per run (`eqdsl report RESULTS_DIR`, `report: html` in a run).

Contract: `page(report)` turns a run's `report.json` (as `eqdsl.report.report_json` writes it) into
one HTML document: no script, no external file, no server — plain HTML and inline SVG. Sections:
the run in one line; the input and optimized programs as graphs diffed by matched node
(`eqdsl.report_graph`: only the rewritten region is coloured as new or gone); the
cost by operator before and after; the exploration's iterations (nodes and matches per rule);
the extractors, and an exact extractor's incumbent and bound over time; predicted against
measured speed-ups (execution, export runtime check) where the run measured them. A report.json from before a section
existed (no `programs`, no `cost_by_op`) gives a page without it. `write_page(folder)` writes
`report.html` into an eqdsl output folder (`eqdsl.output.add_result_file`: never over a user's file).
"""
from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

from eqdsl.diagnostics import EqdslError
from eqdsl.report_graph import GONE, KEY, NEW, SAME, diff, svg

STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:24px;max-width:1200px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}.bar{display:inline-block;height:10px}
.graph{border:1px solid #ddd;overflow:auto;max-height:720px;margin-bottom:12px}
.graph svg{max-width:100%;height:auto}.zoom:checked+label+.graph svg{max-width:none}
.key span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}"""


def write_page(folder: Path) -> Path:
    """Write `folder/report.html` from `folder/report.json`; `EqdslError` if it cannot be read."""
    source = folder / "report.json"
    try:
        report = json.loads(source.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise EqdslError.one(f"cannot read {source}: {err}; expected the report.json of an `eqdsl run`") from None
    if not isinstance(report, dict) or "best_cost" not in report:
        raise EqdslError.one(f"{source}: expected the report.json of an `eqdsl run` (no best_cost)")
    from eqdsl.output import add_result_file

    try:
        text = page(report)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as err:  # an edited report.json
        raise EqdslError.one(f"{source}: a field is not as `eqdsl run` writes it ({type(err).__name__}: "
                             f"{err}); expected the report.json of an `eqdsl run`") from None
    return add_result_file(folder, "report.html", text)


def page(report: dict[str, Any]) -> str:
    title = f"eqdsl: {report.get('language', '?')} / {report.get('program', '?')}"
    body = [f"<h1>{_e(title)}</h1>", _summary(report), _graphs(report), _by_operator(report),
            _iterations(report), _extractors(report), _measured(report)]
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(b for b in body if b) + "\n</body></html>\n")


def _e(value: Any) -> str:
    return html.escape(str(value))


def _num(value: Any) -> str:
    return cost_text(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else _e(value)


def _sig3(value: Any) -> str:
    """A measured or modelled number at 3 significant digits, with k/M/G for thousands (`32.6 M`,
    `5.01 k`, `0.717`); counts and exact costs use `_num`."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return _e(value)
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g}"


def cost_text(cost: float) -> str:
    """A cost as people read it: 7 significant digits, thousands grouped, float noise dropped
    (`635,384` for 635383.999906, `1,039,570` for 1.03957e+06, `0.717254`)."""
    if not math.isfinite(cost):
        return str(cost)
    if cost == 0:
        return "0"
    digits = max(0, 6 - math.floor(math.log10(abs(cost))))
    text = f"{cost:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _table(header: list[str], rows: list[list[str]], escaped: bool = False) -> str:
    head = "".join(f"<th>{h if escaped else _e(h)}</th>" for h in header)
    return "<table><tr>" + head + "</tr>" + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>"
                                                    for row in rows) + "</table>"


def _summary(r: dict) -> str:
    schedule = r.get("schedule", {})
    stages = r.get("stages_s", {})
    line = (f"<p>cost {_num(r.get('original_cost'))} → <b>{_num(r.get('best_cost'))}</b> "
            f"({_num(r.get('improvement_pct'))} % cheaper, {_e(r.get('extractor', {}).get('status', '?'))}); "
            f"e-graph {_num(schedule.get('start_nodes'))} → {_num(schedule.get('final_nodes'))} nodes, stopped: "
            f"{_e(schedule.get('stop_reason', '?'))}</p>")
    return line + _table(["stage", "seconds"], [[_e(k), f"{v:.3f}"] for k, v in stages.items()])


def checked_programs(report: dict) -> dict[str, dict]:
    """The report's `programs`, each a DAG as `eqdsl run` writes it: `nodes` (each an `op` and
    `args`, a child written `{"node": i}` with i an earlier node) and `roots`; `EqdslError` naming
    the first part that is not (an edited report.json)."""
    programs = report.get("programs") or {}
    if not isinstance(programs, dict):
        raise _malformed("programs", "an object of programs", programs)
    for name, program in programs.items():
        where = f"programs.{name}"
        nodes = program.get("nodes") if isinstance(program, dict) else None
        if not isinstance(nodes, list) or not isinstance(program.get("roots"), list):
            raise _malformed(where, "an object with lists `nodes` and `roots`", program)
        for i, node in enumerate(nodes):
            _check_node(node, i, f"{where}.nodes[{i}]")
        for k, root in enumerate(program["roots"]):
            if not (isinstance(root, int) and 0 <= root < len(nodes)):
                raise _malformed(f"{where}.roots[{k}]", f"a node index below {len(nodes)}", root)
    return programs


def _check_node(node: Any, index: int, where: str) -> None:
    if not (isinstance(node, dict) and isinstance(node.get("op"), str) and isinstance(node.get("args"), list)):
        raise _malformed(where, "an object with `op` (a string) and `args` (a list)", node)
    for k, arg in enumerate(node["args"]):
        if isinstance(arg, dict) and not (isinstance(arg.get("node"), int) and 0 <= arg["node"] < index):
            raise _malformed(f"{where}.args[{k}]", f"a child {{\"node\": i}} with 0 <= i < {index} (an "
                                                   "earlier node: a program is a DAG)", arg)


def _malformed(where: str, expected: str, found: Any) -> EqdslError:
    shown = json.dumps(found)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return EqdslError.one(f"expected {expected}, found {shown}", path=f"report.json: {where}")


def _graphs(r: dict) -> str:
    programs = checked_programs(r)
    if not {"input", "optimized"} <= set(programs):
        return ""
    colours = dict(zip(("input", "optimized"), diff(programs["input"], programs["optimized"])))
    key = "<p class=key>nodes:" + "".join(f"<span style='background:{c}'></span>{_e(t)}" for c, t in KEY) + \
        " (edges point from a node to its operands; hover a box for its nodes, shapes and costs)</p>"
    facts = r.get("program_facts") or {}
    drawn = []
    for name in ("input", "optimized"):
        count = len(programs[name]["nodes"])
        graph = svg(programs[name], colours[name], _facts(facts.get(name), count), name)
        drawn.append(f"<div><h3>{name} ({count} nodes)</h3>{graph}</div>")
    return "<h2>Programs</h2>" + key + "<div class=graphs>" + "".join(drawn) + "</div>"


def _facts(facts: Any, count: int) -> list[dict] | None:
    """Per node `shape` and `cost`, where report.json has them for every node."""
    if isinstance(facts, list) and len(facts) == count and all(isinstance(f, dict) for f in facts):
        return facts
    return None


def _by_operator(r: dict) -> str:
    by_op = r.get("cost_by_op")
    if not by_op:
        return ""
    before, after = by_op.get("input", {}), by_op.get("optimized", {})
    ops = sorted(set(before) | set(after), key=lambda op: -max(before.get(op, 0), after.get(op, 0)))
    largest = max([*before.values(), *after.values(), 1e-300])
    rows = []
    for op in ops:
        b, a = before.get(op, 0.0), after.get(op, 0.0)
        bars = (f"<span class=bar style='width:{200 * b / largest:.1f}px;background:{GONE}'></span><br>"
                f"<span class=bar style='width:{200 * a / largest:.1f}px;background:{NEW}'></span>")
        rows.append([_e(op), _sig3(b), _sig3(a), _sig3(a - b), bars])
    return "<h2>Cost by operator</h2>" + _table(["operator", "input", "optimized", "change", ""], rows)


def _iterations(r: dict) -> str:
    iterations = r.get("schedule", {}).get("iterations", [])
    if not iterations:
        return ""
    rules = sorted({rule for it in iterations for rule, n in it.get("matches", {}).items() if n})
    given = r.get("rule_text")
    texts: dict = given if isinstance(given, dict) else {}
    named = [f"<abbr title=\"{_e(texts[rule])}\">{_e(rule)}</abbr>" if rule in texts else _e(rule) for rule in rules]
    header = [_e(h) for h in ("iteration", "ruleset", "nodes", "classes", "seconds")] + named
    rows = [[_num(it.get("iteration")), _e(it.get("ruleset")), _num(it.get("nodes")), _num(it.get("classes") or ""),
             f"{it.get('seconds', 0):.3f}" + (" (rolled back)" if it.get("rolled_back") else ""),
             *(_num(it.get("matches", {}).get(rule, 0)) for rule in rules)] for it in iterations]
    chart = _line_chart({"nodes": [(i, it.get("nodes", 0)) for i, it in enumerate(iterations, 1)]},
                        "iteration", "e-nodes")
    return "<h2>Exploration</h2>" + chart + "<div class=graph>" + _table(header, rows, escaped=True) + "</div>"


def _extractors(r: dict) -> str:
    compare = r.get("compare", {})
    rows = [[_e(m), _sig3(e.get("cost")), _e(e.get("status")), "" if e.get("bound") is None else _sig3(e["bound"]),
             "" if e.get("gap") is None else f"{100 * e['gap']:.2f} %", f"{e.get('seconds', 0):.3f}",
             _e(e.get("note", ""))] for m, e in compare.items()]
    out = "<h2>Extraction</h2>" + _table(["extractor", "DAG cost", "status", "bound", "gap", "seconds", "note"], rows)
    trace = r.get("extractor", {}).get("trace") or []
    if trace:
        out += "<p>best program's cost and the lower bound, by seconds into the extraction:</p>" + _line_chart(
            {"cost": [(t, c) for t, c, _ in trace], "bound": [(t, b) for t, _, b in trace]}, "seconds", "cost")
    return out


def _measured(r: dict) -> str:
    rows = []
    execution, export = r.get("execution"), r.get("export")
    if isinstance(execution, dict) and "speedup" in execution:
        rows.append([f"eqdsl's {_e(execution.get('device'))} kernels", _ratio(execution.get("predicted_speedup")),
                     _ratio(execution.get("speedup")), _e(execution.get("ok"))])
    runtime = export.get("runtime") if isinstance(export, dict) else None
    if isinstance(runtime, dict) and isinstance(runtime.get("speedup"), dict):
        for threads, speedup in runtime["speedup"].items():
            rows.append([f"ONNX Runtime CPU, {_e(threads)} thread(s) (exported models)",
                         _ratio(runtime.get("predicted_speedup")), _ratio(speedup), _e(runtime.get("ok"))])
    if not rows:
        return ""
    return ("<h2>Predicted and measured</h2>" + _table(["measured on", "predicted speed-up", "measured speed-up",
                                                        "outputs agree"], rows) + _decision(runtime))


def _ratio(value: Any) -> str:
    """A speed-up to three decimals (`1.302×`): more digits than the noise would be noise."""
    return f"{value:.3f}×" if isinstance(value, (int, float)) and not isinstance(value, bool) else _e(value)


def _decision(runtime: Any) -> str:
    """What the export handed back, and the measurement it decided on (1 thread, 95 %)."""
    if not isinstance(runtime, dict) or "handed_back" not in runtime:
        return ""
    interval = runtime.get("ratio_interval_1_thread")
    measured = (f"; the optimized model's time ÷ the input's, 1 thread: [{interval[0]:.3f}, {interval[1]:.3f}] "
                "(95 %)" if isinstance(interval, list) and len(interval) == 2 else "")
    given = {"input": "your input model, unchanged (the rewrite was not faster beyond noise)",
             "optimized": "the optimized model"}.get(runtime["handed_back"], f"candidate {runtime['handed_back']}")
    return f"<p>Handed back as optimized.onnx: <b>{_e(given)}</b>{_e(measured)}.</p>"


def _line_chart(series: dict[str, list[tuple[float, float]]], x_label: str, y_label: str) -> str:
    points = [p for s in series.values() for p in s]
    if not points:
        return ""
    (x0, x1), (y0, y1) = _span([p[0] for p in points], from_zero=True), _span([p[1] for p in points])
    w, h, pad = 520, 200, 48

    def at(x: float, y: float) -> str:
        return f"{pad + (w - 2 * pad) * (x - x0) / (x1 - x0):.1f},{h - pad + (2 * pad - h) * (y - y0) / (y1 - y0):.1f}"

    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-size='11'>",
             f"<line x1='{pad}' y1='{h - pad}' x2='{w - pad}' y2='{h - pad}' stroke='#888'/>",
             f"<line x1='{pad}' y1='{pad}' x2='{pad}' y2='{h - pad}' stroke='#888'/>",
             f"<text x='{w / 2}' y='{h - 12}' text-anchor='middle'>{_e(x_label)} ({_sig3(x0)} to {_sig3(x1)})</text>",
             f"<text x='8' y='{pad - 16}'>{_e(y_label)} ({_sig3(y0)} to {_sig3(y1)})</text>"]
    for n, (name, pts) in enumerate(series.items()):
        colour = (NEW, SAME, GONE)[n % 3]
        parts.append(f"<polyline fill='none' stroke='{colour}' stroke-width='2' points='"
                     + " ".join(at(x, y) for x, y in pts) + "'/>")
        if len(pts) < 20:  # few points (one CP-SAT round): marked, a line of one point draws nothing
            parts += [f"<circle cx='{at(x, y).split(',')[0]}' cy='{at(x, y).split(',')[1]}' r='3' fill='{colour}'/>"
                      for x, y in pts]
        parts.append(f"<text x='{w - pad + 4}' y='{pad + 14 * n}' fill='{colour}'>{_e(name)}</text>")
    return "".join(parts) + "</svg>"


def _span(values: list[float], from_zero: bool = False) -> tuple[float, float]:
    """The axis's range (`from_zero`: from 0 where every value is ≥ 0, as seconds and iterations
    are), widened where all values are one: a single point sits inside its axis."""
    low, high = min(values), max(values)
    if from_zero and low >= 0:
        low = 0.0
    if high > low:
        return low, high
    return (low, high + 1) if high == 0 else (low - abs(low) / 2, high + abs(high) / 2)
