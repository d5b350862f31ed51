"""Running a sweep: the output folder, the executors (local processes, Ray), finished tasks kept.

Contract: `run_sweep(sweep, progress)` runs every task without a successful result in
`output/tasks/<id>.json` (a re-run skips finished tasks and retries failed ones), writes each result
there as it arrives (atomically), and returns all results by task id. The output folder holds only
files the sweep writes (`SWEEP_FILES`, marker `.eqdsl-sweep`): anything else in it is an error
before any task runs. Local tasks run `workers` at once, each in a forked process under the
schedule's memory and time guard (one dying fails only its task); with `executor: ray` they are Ray
tasks (each in a fresh `python -m eqdsl.sweep.tasks`), on `ray_address`'s cluster or a Ray started
here with `workers` CPUs. Ctrl-C ends the sweep (the command's worker takes its processes with it);
finished results stay.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from eqdsl.diagnostics import EqdslError
from eqdsl.output import check_output, write_file_atomically
from eqdsl.sweep.spec import Sweep, Task
from eqdsl.sweep.tasks import run_task_isolated, task_result, task_work
from eqdsl.worker import reap_quietly, start_lineage, wait_lineages

MARKER = ".eqdsl-sweep"
# "plots" holds the figures; the two .png names are where sweeps before it drew them
SWEEP_FILES = frozenset({MARKER, "tasks", "results.csv", "results.md", "plots", "speedup_vs_time.png",
                         "rules_heatmap.png"})
Progress = Callable[[Task, dict[str, Any], int, int], None]  # task, result, done, total


def prepare_output(sweep: Sweep) -> Path:
    out = check_output(sweep.output, [sweep.source], force=True)  # location rules; contents below
    if out.is_dir():
        names = {p.name for p in out.iterdir()}
        foreign = sorted(names - SWEEP_FILES) or (sorted(names) if names and MARKER not in names else [])
        if foreign:
            raise EqdslError.one(f"output folder {sweep.output} holds files a sweep did not write "
                                 f"({', '.join(foreign[:5])}); expected an empty folder or an earlier "
                                 "sweep's", path="output")
    (out / "tasks").mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by eqdsl sweep\n")
    return out


def finished(out: Path, task: Task) -> dict[str, Any] | None:
    path = out / "tasks" / f"{task.id}.json"
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return result if result.get("ok") else None


def run_sweep(sweep: Sweep, progress: Progress | None = None) -> dict[str, dict[str, Any]]:
    if sweep.executor == "ray":
        _require_ray(sweep.ray_address)  # before anything is written
    out = prepare_output(sweep)
    results = {t.id: r for t in sweep.tasks if (r := finished(out, t)) is not None}
    todo = [t for t in sweep.tasks if t.id not in results]
    execute = _ray if sweep.executor == "ray" else _local

    def record(task: Task, result: dict[str, Any]) -> None:
        document = {"id": task.id, "labels": dict(task.labels), "config": task.config, **result}
        write_file_atomically(out / "tasks" / f"{task.id}.json", json.dumps(document, indent=1, default=str) + "\n")
        results[task.id] = document
        if progress is not None:
            progress(task, document, len(results), len(sweep.tasks))

    execute(sweep, todo, record)
    return results


def _local(sweep: Sweep, todo: list[Task], record: Callable[[Task, dict[str, Any]], None]) -> None:
    """Up to `workers` tasks at once, each in its own forked lineage (eqdsl.worker): the
    per-iteration memory and time guard holds in each, and a task whose process dies is recorded
    as failed while the others go on."""
    queue = list(reversed(todo))
    running: dict[int, bytearray] = {}
    started: dict[int, tuple[Task, int]] = {}  # fd → (task, first pid)
    while queue or running:
        while queue and len(running) < sweep.workers:
            task = queue.pop()
            lineage = start_lineage(task_work(task.config, str(sweep.source)))
            running[lineage.fd] = bytearray()
            started[lineage.fd] = (task, lineage.pid)
        for fd, data in wait_lineages(running):
            task, pid = started.pop(fd)
            record(task, task_result(data, reap_quietly(pid)))


def _require_ray(address: str | None) -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        raise EqdslError.one("executor ray needs Ray: pip install 'eqdsl[ray]'", path="executor") from None
    if address:
        _probe(address)


def _ray(sweep: Sweep, todo: list[Task], record: Callable[[Task, dict[str, Any]], None]) -> None:
    import ray

    try:
        if sweep.ray_address:
            ray.init(address=sweep.ray_address, log_to_driver=False)
        else:
            ray.init(num_cpus=sweep.workers, include_dashboard=False, log_to_driver=False)
    except Exception as err:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ...
        raise EqdslError.one(f"cannot start or reach Ray at {sweep.ray_address or 'a local instance'}: "
                             f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                             path="ray_address") from None
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(run_task_isolated)
        pending = {remote.remote(t.config, str(sweep.source)): t for t in todo}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                task = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as err:  # noqa: BLE001 - a crashed Ray worker: recorded, go on
                    result = {"ok": False, "error": f"Ray task failed: {type(err).__name__}: {err}"}
                record(task, result)
    finally:
        ray.shutdown()


PROBE_SECONDS = 5.0


def _probe(address: str) -> None:
    """Fail fast on an address nothing answers at: Ray itself retries for minutes."""
    import socket

    if address == "auto":
        return
    host, _, port = address.split("://")[-1].rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=PROBE_SECONDS).close()
    except (OSError, ValueError) as err:
        raise EqdslError.one(f"no Ray cluster answers at {address}: {err}; expected HOST:PORT of a running "
                             "Ray head (or ray://HOST:PORT, or no address to start Ray here)",
                             path="ray_address") from None
