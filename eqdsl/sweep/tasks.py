"""One sweep task: a run of the pipeline, summarised as a JSON-able dict (in a worker process).

Contract: `run_task(config, source)` never raises for a failing run: it returns `{"ok": False,
"error": ...}` (a user mistake rendered as eqdsl renders it, anything else as its type and
message), so one bad task never ends a sweep. On success the summary holds the costs, the
speedup (% cheaper on the target's cost model), seconds per stage, the schedule's stop reason
and nodes, and `rule_matches`: per rule, the matches of the iterations the e-graph kept (the
rule-application heatmap's data).
"""
from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from eqdsl.diagnostics import EqdslError


def run_task(config: dict[str, Any], source: str) -> dict[str, Any]:
    from eqdsl.config import parse_config
    from eqdsl.pipeline import run_pipeline

    t0 = time.perf_counter()
    try:
        result = run_pipeline(parse_config(config, Path(source)))
    except EqdslError as err:
        return {"ok": False, "error": "; ".join(d.render() for d in err.diagnostics),
                "seconds": time.perf_counter() - t0}
    except Exception as err:  # noqa: BLE001 - recorded, the sweep goes on
        return {"ok": False, "error": f"{type(err).__name__}: {err}", "seconds": time.perf_counter() - t0}
    outcome = result.outcome
    assert outcome is not None
    matches: Counter[str] = Counter()
    for report in outcome.iterations:
        if not report.rolled_back:
            matches.update(report.matches)
    best = result.best
    return {
        "ok": True, "seconds": time.perf_counter() - t0,
        "optimization_seconds": sum(v for k, v in result.stages.items() if k == "schedule" or k.startswith("extract")),
        "original_cost": result.original_cost, "best_cost": best.cost,
        "speedup_pct": 100 * (1 - best.cost / result.original_cost) if result.original_cost else 0.0,
        "extraction": best.status.value, "stop": outcome.stop.value, "nodes": outcome.nodes,
        "steps": [s.rule for s in outcome.steps], "rule_matches": dict(sorted(matches.items())),
        "stages_s": result.stages,
    }
