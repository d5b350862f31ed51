"""A sweep's merged results: one row per task in `results.csv` and `results.md`, and plots.

Contract: `write_tables(out, sweep, results)` writes both tables atomically (columns: task id,
the label keys, status, original and best cost, speedup %, optimization seconds, nodes, stop,
error); `write_plots(...)` draws speedup against optimization time per model and the
rule-application heatmap (tasks × rules, matches kept) with matplotlib, and returns a note
instead when matplotlib is not installed (`pip install 'eqdsl[sweep]'`).
"""
from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from eqdsl.output import replace_atomically, write_file_atomically
from eqdsl.sweep.spec import Sweep

VALUES = ("status", "original_cost", "best_cost", "speedup_pct", "optimization_seconds", "nodes", "stop", "error")


def rows(sweep: Sweep, results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    table = []
    for task in sweep.tasks:
        r = results.get(task.id, {"ok": False, "error": "not run"})
        row: dict[str, Any] = {"task": task.id, **{k: dict(task.labels).get(k, "") for k in sweep.keys}}
        row["status"] = "ok" if r.get("ok") else "failed"
        for key in VALUES[1:]:
            value = r.get(key, "")
            row[key] = f"{value:.6g}" if isinstance(value, float) else value
        table.append(row)
    return table


def write_tables(out: Path, sweep: Sweep, results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    table = rows(sweep, results)
    columns = ["task", *sweep.keys, *VALUES]
    text = io.StringIO()
    writer = csv.DictWriter(text, columns)
    writer.writeheader()
    writer.writerows(table)
    write_file_atomically(out / "results.csv", text.getvalue())
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row[c]).replace("|", "/").replace("\n", " ") for c in columns) + " |"
              for row in table]
    write_file_atomically(out / "results.md", "\n".join(lines) + "\n")
    return table


def write_plots(out: Path, sweep: Sweep, results: dict[str, dict[str, Any]]) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plots skipped: matplotlib is not installed (pip install 'eqdsl[sweep]')"
    ok = [(t, results[t.id]) for t in sweep.tasks if results.get(t.id, {}).get("ok")]
    if not ok:
        return "plots skipped: no task finished"
    _speedup_vs_time(plt, ok, out / "speedup_vs_time.png")
    _heatmap(plt, ok, out / "rules_heatmap.png")
    return "plots: speedup_vs_time.png, rules_heatmap.png"


def _model(labels: dict[str, str]) -> str:
    return next((v for k, v in labels.items() if k.startswith("program")), "program")


def _method(labels: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in labels.items() if not k.startswith("program") and k != "seed") or "run"


def _speedup_vs_time(plt, ok: list, path: Path) -> None:
    models = sorted({_model(dict(t.labels)) for t, _ in ok})
    fig, axes = plt.subplots(1, len(models), figsize=(4.5 * len(models), 3.6), squeeze=False)
    for ax, model in zip(axes[0], models):
        for method in sorted({_method(dict(t.labels)) for t, _ in ok}):
            points = [(r["optimization_seconds"], r["speedup_pct"]) for t, r in ok
                      if _model(dict(t.labels)) == model and _method(dict(t.labels)) == method]
            if points:
                ax.scatter(*zip(*points), label=method[:40], s=24)
        ax.set(title=model, xlabel="optimization time (s)", ylabel="speedup (% cheaper)")
    axes[0][0].legend(fontsize=6)
    replace_atomically(path, lambda tmp: fig.savefig(tmp, dpi=120, bbox_inches="tight"))
    plt.close(fig)


def _heatmap(plt, ok: list, path: Path) -> None:
    rules = sorted({rule for _, r in ok for rule, n in r["rule_matches"].items() if n})
    if not rules:
        return
    names = [f"{_model(dict(t.labels))} {_method(dict(t.labels))[:36]} {dict(t.labels).get('seed', '')}" for t, _ in ok]
    grid = [[r["rule_matches"].get(rule, 0) for rule in rules] for _, r in ok]
    fig, ax = plt.subplots(figsize=(max(6, 0.12 * len(rules)), max(3, 0.3 * len(names))))
    image = ax.imshow([[0 if v == 0 else 1 + math.log10(v) for v in row] for row in grid],
                      aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(rules)), rules, rotation=90, fontsize=5)
    ax.set_yticks(range(len(names)), names, fontsize=6)
    fig.colorbar(image, ax=ax, label="1 + log10(matches kept)")
    replace_atomically(path, lambda tmp: fig.savefig(tmp, dpi=120, bbox_inches="tight"))
    plt.close(fig)

