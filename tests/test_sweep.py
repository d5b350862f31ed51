"""`eqdsl sweep`: tasks expand from a grid and seeds, run on local processes (and Ray), merge into
one table; a failing task is recorded, a re-run skips finished tasks; bad input names the key."""
from __future__ import annotations

import csv
import json

import pytest
import yaml

from conftest import EXAMPLES

BASE = {"ruleset": "arith", "program": str(EXAMPLES / "arith" / "input.eqr"),
        "extract": {"method": "cpsat", "time_limit_s": 5, "compare": []}}
GRID = {"schedule": [{"kind": "saturate", "iter_limit": 2}, {"kind": "mcts", "budget": 4, "node_limit": 200},
                     {"kind": "saturate", "node_limit": 1}]}  # the last fails: the input has 5 e-nodes


def _sweep(tmp_path, **extra):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"base": BASE, "grid": GRID, "seeds": [0, 1], "output": "out", "workers": 2,
                                    **extra}, sort_keys=False))
    return path


def test_sweep_runs_every_task_records_failures_and_skips_finished_ones(tmp_path, run_cli):
    path = _sweep(tmp_path)
    code, out, err = run_cli("sweep", path)
    assert code == 1, out + err  # one task failed
    with open(tmp_path / "out" / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["schedule"].split(",")[0], r["seed"], r["status"]) for r in rows] == [
        ("kind=saturate", "", "ok"), ("kind=mcts", "0", "ok"), ("kind=mcts", "1", "ok"), ("kind=saturate", "", "failed")]
    assert "expected a node limit of at least the input program's 4 e-nodes" in rows[3]["error"]
    assert float(rows[0]["speedup"]) > 1 and float(rows[0]["cost_removed_pct"]) > 0 and (tmp_path / "out" / "results.md").read_text().count("\n") == 6
    task = json.loads((tmp_path / "out" / "tasks" / f"{rows[1]['task']}.json").read_text())
    assert task["ok"] and task["rule_matches"] and task["config"]["schedule"]["seed"] == 0
    assert (tmp_path / "out" / "plots" / "speedup_vs_time_input.png").stat().st_size > 0  # one file per model
    assert (tmp_path / "out" / "plots" / "rules_heatmap.png").stat().st_size > 0
    code, out, _ = run_cli("sweep", path)  # again: only the failed task runs
    assert code == 1 and out.count("] schedule=") == 1 and "FAILED" in out


def test_sweep_on_ray(tmp_path, run_cli):
    pytest.importorskip("ray")
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"base": BASE, "grid": {"schedule.iter_limit": [1, 2]}, "output": "out",
                                    "workers": 2, "executor": "ray"}))
    code, out, err = run_cli("sweep", path)
    assert code == 0, out + err
    assert out.count("× (predicted)") == 2 and "on ray (2 at once)" in out


@pytest.mark.parametrize("change, path, message", [
    ({"workers": 0}, "workers", "an int ≥ 1"),
    ({"executor": "slurm"}, "executor", "local or ray"),
    ({"grid": {"schedule.budget": [0]}}, "grid", "schedule.budget"),
    ({"grid": {"schedule.kind": ["anneal"]}}, "grid", "schedule.kind"),
    ({"colour": "red"}, "colour", "unknown key"),
])
def test_bad_sweep_files_name_the_key(tmp_path, run_cli, change, path, message):
    code, _, err = run_cli("sweep", _sweep(tmp_path, **change))
    assert code == 2 and f"{path}: error" in err and message in err, err
    assert not (tmp_path / "out").exists()


def test_unreachable_ray_address_is_a_clear_error(tmp_path, run_cli):
    pytest.importorskip("ray")
    code, _, err = run_cli("sweep", _sweep(tmp_path), "--ray", "127.0.0.1:9")
    assert code == 2 and "ray_address: error: no Ray cluster answers at 127.0.0.1:9" in err
    assert not (tmp_path / "out").exists()


def test_sweep_never_writes_into_a_folder_of_other_files(tmp_path, run_cli):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    code, _, err = run_cli("sweep", _sweep(tmp_path))
    assert code == 2 and "holds files a sweep did not write (notes.txt)" in err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["notes.txt"]


def test_the_heatmap_writes_each_cells_count_in_it(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes

    from eqdsl.sweep import table

    written: list[str] = []
    real = Axes.text
    monkeypatch.setattr(Axes, "text", lambda self, x, y, s, *a, **k: written.append(s) or real(self, x, y, s, *a, **k))
    task = type("Task", (), {"labels": (("schedule", "kind=saturate"),), "config": {"program": "p.eqr"}})()
    ok = [(task, {"rule_matches": {"mul-comm": 1234, "mul-one": 0, "reassoc": 2}})]
    assert table._heatmap(plt, ok, tmp_path / "h.png") and (tmp_path / "h.png").stat().st_size > 0
    assert sorted(written) == ["1,234", "2"]  # a zero cell stays empty
