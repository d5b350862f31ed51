"""A sweep's merged results: one row per task in `results.csv` and `results.md`, and plots.

Contract: `write_tables(out, sweep, results)` writes both tables atomically (columns: task id,
the label keys, status, original and best cost, speedup %, optimization seconds, nodes, stop,
error); `write_plots(...)` draws, in `plots/`, the predicted cost removed against optimization time
(one file per model; colour: method, marker: seed) and the rule-application heatmap (tasks ×
rules, matches kept, rules by the names users gave them) with matplotlib, and returns a note
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

# `speedup`: the input's cost ÷ the best one's (2.45 for 59 % of the cost removed), from the two costs
VALUES = ("status", "original_cost", "best_cost", "speedup", "cost_removed_pct", "optimization_seconds", "nodes",
          "stop", "error")


def rows(sweep: Sweep, results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    table = []
    for task in sweep.tasks:
        r = with_ratios(results.get(task.id, {"ok": False, "error": "not run"}))
        row: dict[str, Any] = {"task": task.id, **{k: dict(task.labels).get(k, "") for k in sweep.keys}}
        row["status"] = "ok" if r.get("ok") else "failed"
        for key in VALUES[1:]:
            value = r.get(key, "")
            row[key] = f"{value:.6g}" if isinstance(value, float) else value
        table.append(row)
    return table


def with_ratios(r: dict[str, Any]) -> dict[str, Any]:
    """The result with `speedup` and `cost_removed_pct` computed from its costs (also for results
    a sweep stored before these columns existed)."""
    original, best = r.get("original_cost"), r.get("best_cost")
    if not isinstance(original, (int, float)) or not isinstance(best, (int, float)) or best <= 0 or original <= 0:
        return r
    return {**r, "speedup": original / best, "cost_removed_pct": 100 * (1 - best / original)}


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
    (out / PLOTS).mkdir(exist_ok=True)
    written = [_speedup_vs_time(plt, ok, model, out / PLOTS) for model in sorted({_model(t) for t, _ in ok})]
    if _heatmap(plt, ok, out / PLOTS / "rules_heatmap.png"):
        written.append("rules_heatmap.png")
    return f"plots in {PLOTS}/: {', '.join(written)}"


PLOTS = "plots"  # the sweep's figures: one speedup_vs_time_<model>.png per model, rules_heatmap.png


def _model(task) -> str:
    """The grid's program value, else what the base config's program names (file stem, builder)."""
    labelled = next((v for k, v in task.labels if k.startswith("program")), None)
    if labelled is not None:
        return labelled
    program = task.config.get("program")
    if isinstance(program, dict):
        named = program.get("builder") or program.get("onnx") or program.get("file") or "program"
        return Path(str(named)).stem
    return Path(program).stem if isinstance(program, str) and "\n" not in program else "program"


def _method(task) -> str:
    return ", ".join(f"{k}={v}" for k, v in task.labels if not k.startswith("program") and k != "seed") or "run"


def _seed(task) -> str:
    return dict(task.labels).get("seed", "")


MARKERS = "os^Dv<>P*X"  # one per seed


def _speedup_vs_time(plt, ok: list, model: str, folder: Path) -> str:
    """One figure per model: each method a colour, each seed a marker, the legend beside the axes."""
    mine = [(t, r) for t, r in ok if _model(t) == model]
    methods, seeds = sorted({_method(t) for t, _ in mine}), sorted({_seed(t) for t, _ in mine})
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for colour, method in enumerate(methods):
        for marker, seed in zip(MARKERS * len(seeds), seeds):
            points = [(r["optimization_seconds"], with_ratios(r).get("speedup", 1.0)) for t, r in mine
                      if _method(t) == method and _seed(t) == seed]
            if points:
                ax.scatter(*zip(*points), color=f"C{colour % 10}", marker=marker, s=36,
                           label=method + (f" (seed {seed})" if seed else ""))
    ax.set(title=model, xlabel="optimization time (s)", ylabel="predicted speed-up (input cost ÷ optimized cost)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    name = "speedup_vs_time_" + "".join(c if c.isalnum() or c in "-_." else "_" for c in model) + ".png"
    replace_atomically(folder / name, lambda tmp: fig.savefig(tmp, dpi=120, bbox_inches="tight"))
    plt.close(fig)
    return name


def rule_label(name: str) -> str:
    """The name a user gave the rule (eqdsl's generated variants, `r__gated`, `r__record`, count as `r`)."""
    return name.split("__")[0]


def _heatmap(plt, ok: list, path: Path) -> bool:
    counts = [_by_rule(r["rule_matches"]) for _, r in ok]
    rules = sorted({rule for c in counts for rule, n in c.items() if n})
    if not rules:
        return False
    names = [f"{_model(t)} · {_method(t)}" + (f" · seed {_seed(t)}" if _seed(t) else "") for t, _ in ok]
    grid = [[c.get(rule, 0) for rule in rules] for c in counts]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.16 * len(rules) + 3), max(3.0, 0.32 * len(names) + 1.5)))
    image = ax.imshow([[0 if v == 0 else 1 + math.log10(v) for v in row] for row in grid],
                      aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(rules)), rules, rotation=90, fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    for i, row in enumerate(grid):  # each cell's count in it (a colour alone reads as a range)
        for j, v in enumerate(row):
            if v:
                ax.text(j, i, f"{v:,}", ha="center", va="center", fontsize=5, color="white")
    ax.set_xlabel("rule")
    fig.colorbar(image, ax=ax, label="1 + log10(matches kept)")
    replace_atomically(path, lambda tmp: fig.savefig(tmp, dpi=120, bbox_inches="tight"))
    plt.close(fig)
    return True


def _by_rule(matches: dict[str, int]) -> dict[str, int]:
    summed: dict[str, int] = {}
    for name, n in matches.items():
        summed[rule_label(name)] = summed.get(rule_label(name), 0) + n
    return summed
