"""One sweep task: a run of the pipeline, summarised as a JSON-able dict (in a worker process).

Contract: `run_task(config, source)` never raises for a failing run: it returns `{"ok": False,
"error": ...}` (a user mistake rendered as eqdsl renders it, anything else as its type and
message), so one bad task never ends a sweep. On success the summary holds the costs, the
speedup (% cheaper on the target's cost model), seconds per stage, the schedule's stop reason
and nodes, and `rule_matches`: per rule, the matches of the iterations the e-graph kept (the
rule-application heatmap's data). `task_work` is a task as a lineage's work (eqdsl.worker:
the memory and time guard holds there), `task_result` decodes what the lineage left (a lineage
that died without a result is a failed task, with its exit status), and `run_task_isolated`
does both in a fresh interpreter (`python -m eqdsl.sweep.tasks`, the task as JSON on stdin),
for executors whose processes must not fork (Ray's workers).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

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
        "speedup": result.original_cost / best.cost if best.cost > 0 else 1.0,
        "cost_removed_pct": 100 * (1 - best.cost / result.original_cost) if result.original_cost else 0.0,
        "extraction": best.status.value, "stop": outcome.stop.value, "nodes": outcome.nodes,
        "steps": [s.rule for s in outcome.steps], "rule_matches": dict(sorted(matches.items())),
        "stages_s": result.stages,
    }


def task_work(config: dict[str, Any], source: str) -> Callable[[], bytes]:
    return lambda: json.dumps(run_task(config, source), default=str).encode()


def task_result(data: bytes | None, status: int | None) -> dict[str, Any]:
    """The task's summary from its lineage's bytes, or a failure naming how its process ended."""
    if data is not None:
        try:
            result = json.loads(data)
            if isinstance(result, dict):
                return result
        except ValueError:
            pass
    return {"ok": False, "error": f"the task's process died without a result ({_ended(status)})"}


def _ended(status: int | None) -> str:
    if status is None:
        return "exit status unknown"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"killed by {signal.Signals(sig).name}" if sig in signal.valid_signals() else f"signal {sig}"
    return f"exit code {os.WEXITSTATUS(status)}"


def run_task_isolated(config: dict[str, Any], source: str) -> dict[str, Any]:
    """The task in a fresh interpreter that runs it in a guarded lineage."""
    done = subprocess.run([sys.executable, "-m", "eqdsl.sweep.tasks"], input=json.dumps(
        {"config": config, "source": source}, default=str), capture_output=True, text=True)
    result = task_result(done.stdout.encode() or None, None)
    if not result.get("ok") and not done.stdout:
        result["error"] += f": {done.stderr[-500:]}"
    return result


def _main() -> None:
    from eqdsl.worker import reap_quietly, start_lineage, wait_lineages

    task = json.loads(sys.stdin.read())
    lineage = start_lineage(task_work(task["config"], task["source"]))
    [(_, data)] = wait_lineages({lineage.fd: bytearray()})
    sys.stdout.write(json.dumps(task_result(data, reap_quietly(lineage.pid)), default=str))


if __name__ == "__main__":
    _main()
