"""The `sweep.yaml` file and the tasks it expands to.

```yaml
base: run.yaml               # a run config (path relative to this file) or a mapping: every task's start
grid:                        # dotted keys into the run config → the values to try (cartesian product)
  program.builder: [nasrnn, bert]
  schedule: [{kind: saturate, k_multi: 1}, {kind: mcts, budget: 32}]
  target: [a100]
seeds: [0, 1, 2]             # one task per seed where the task's schedule has a `seed` (mcts)
output: results/sweep        # tasks/<id>.json, results.csv, results.md, plots
workers: 2                   # local processes (or Ray tasks at once)
executor: local              # local | ray
ray_address: null            # ray: a cluster's address; null starts Ray on this machine
```

Contract: `load_sweep(path)` validates the file and every task's run config up front (a bad
key or value: `EqdslError` naming the sweep key, or the task and the run config's key). A task's
`id` hashes its full run config (canonical JSON), so a re-run finds the tasks already finished.
"""
from __future__ import annotations

import copy
import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eqdsl.config import parse_config
from eqdsl.diagnostics import EqdslError
from eqdsl.fields import Reader, int_at_least, load_yaml, one_of

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Task:
    id: str
    labels: tuple[tuple[str, str], ...]  # (grid key or "seed", value as text), for tables and plots
    config: dict[str, Any]  # the full run config


@dataclass(frozen=True)
class Sweep:
    source: Path
    tasks: tuple[Task, ...]
    keys: tuple[str, ...]  # label keys, in column order
    output: Path
    workers: int
    executor: str
    ray_address: str | None


def load_sweep(path: Path) -> Sweep:
    data = _yaml(path)
    r = Reader(data, "")
    base = _base(r.get("base", None, lambda v: isinstance(v, (str, dict)), "a run config path or mapping"), path)
    grid = r.get("grid", {}, lambda v: isinstance(v, dict) and all(isinstance(x, list) and x for x in v.values()),
                 "a mapping of dotted run-config keys to non-empty lists")
    seeds = r.get("seeds", [0], lambda v: isinstance(v, list) and bool(v) and all(int_at_least(0)(s) for s in v),
                  "a non-empty list of ints ≥ 0")
    output = r.get("output", f"results/{path.stem}", lambda v: isinstance(v, str) and v != "", "a folder path")
    workers = r.get("workers", 1, int_at_least(1), "an int ≥ 1")
    executor = r.get("executor", "local", one_of(EXECUTORS), "local or ray")
    address = r.get("ray_address", None, lambda v: v is None or isinstance(v, str), "a Ray address or null")
    r.finish()
    _check_size(grid, seeds)
    tasks = _expand(base, grid, seeds, path)
    keys = tuple(dict.fromkeys(k for t in tasks for k, _ in t.labels))
    return Sweep(path, tasks, keys, (path.parent / output).resolve(), workers, executor, address)


def _yaml(path: Path) -> Any:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise EqdslError.one(f"cannot read sweep file {path}: {err}") from None
    return load_yaml(text, str(path))


MAX_TASKS = 10_000


def _check_size(grid: dict[str, list], seeds: list[int]) -> None:
    """Refuse, before expanding it, a grid of more than `MAX_TASKS` tasks (every task's config is
    validated up front: a million would take minutes before the first line)."""
    count = len(seeds)
    for values in grid.values():
        count *= len(values)
    if count > MAX_TASKS:
        sizes = " × ".join([*(f"{len(v)} {k}" for k, v in grid.items()), f"{len(seeds)} seeds"])
        raise EqdslError.one(f"expected at most {MAX_TASKS:,} tasks, the grid makes up to {count:,} ({sizes}); "
                             "split the sweep into several files", path="grid")


def _base(value: str | dict, path: Path) -> dict:
    if isinstance(value, dict):
        return value
    data = _yaml(path.parent / value)
    if not isinstance(data, dict):
        raise EqdslError.one(f"expected a run config mapping in {value}", path="base")
    return data


def _expand(base: dict, grid: dict[str, list], seeds: list[int], path: Path) -> tuple[Task, ...]:
    tasks = []
    for values in itertools.product(*grid.values()):
        config = copy.deepcopy(base)
        for key, value in zip(grid, values):
            _set(config, key, copy.deepcopy(value))
        labels = tuple((k, _label(v)) for k, v in zip(grid, values))
        seeded = _check(config, labels, path)
        for seed in seeds if seeded else [None]:
            task_config = copy.deepcopy(config)
            if seed is not None:
                task_config["schedule"]["seed"] = seed
            task_labels = labels + ((("seed", str(seed)),) if seed is not None else ())
            tasks.append(Task(task_id(task_config), task_labels, task_config))
    return tuple(tasks)


def _set(config: dict, dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = config
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = value


def _check(config: dict, labels: tuple[tuple[str, str], ...], path: Path) -> bool:
    """Validate one grid point's run config; whether its schedule takes a seed."""
    try:
        parsed = parse_config(config, path)
    except EqdslError as err:
        where = ", ".join(f"{k}={v}" for k, v in labels) or "the base config"
        raise EqdslError.one(f"task {where}: {err.diagnostics[0].path}: {err.diagnostics[0].message}",
                             path="grid") from None
    return hasattr(parsed.schedule, "seed")


def _label(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}={_label(v)}" for k, v in value.items())
    return str(value)


def task_id(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]
