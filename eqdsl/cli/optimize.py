"""`eqdsl optimize MODEL.onnx -o OUT.onnx`: an ONNX model in, the fastest equivalent model out, no
config file (onnxslim's one-line path, with eqdsl's search, checks and measurement).

The run is `eqdsl run`'s with a config made here (`optimize_config`: the CPU rules `cpu`, the
CPU target, CP-SAT, one validation sample, the ONNX export checked and timed under ONNX Runtime),
written into a private scratch folder; only the model (and its `.data` weights, where it has
them) is published at `-o`, as `FileScratch` publishes: never over a file eqdsl did not write,
unless `--force` and it was there before. `--report FILE` also keeps `report.json`. The terminal
gets a table of ONNX operator counts before and after, the file sizes, the predicted and the
measured speed-up, and the export's verdict as the last line.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from eqdsl import status
from eqdsl.cli.common import (
    FORCE_HELP,
    TARGET_HELP,
    Work,
    constant_flag,
    published,
    shape_flag,
    stderr,
    stdout,
)
from eqdsl.output import FileScratch

DEFAULTS: dict[str, Any] = {"ruleset": "cpu", "target": "cpu",
            "schedule": {"kind": "saturate", "iter_limit": 15, "node_limit": 50_000, "k_multi": 1,
                         "cycle_filter": "efficient"},
            "extract": {"method": "cpsat", "time_limit_s": 60, "compare": []},
            "validate": {"samples": 1}, "export": {"format": "onnx", "time_without_gain": False}}


def add_optimize_command(sub) -> None:
    c = sub.add_parser("optimize", help="an ONNX model in, the fastest equivalent ONNX model out (no config)")
    c.add_argument("model", help="the .onnx file to optimize")
    c.add_argument("-o", "--output", required=True, help="the optimized .onnx to write (a new file)")
    c.add_argument("--shape", action="append", type=shape_flag, metavar="INPUT=D1,D2,...",
                   help="a static shape for an input with dynamic dimensions (repeatable)")
    c.add_argument("--constant", action="append", type=constant_flag, metavar="INPUT=NUMBER",
                   help="an input fixed to a value: it becomes a constant (repeatable)")
    c.add_argument("--ruleset", default=DEFAULTS["ruleset"],
                   help="the rules (default: cpu, those that pay on ONNX Runtime's CPU; mined: and TASO's)")
    c.add_argument("--target", default=DEFAULTS["target"], help=TARGET_HELP + " (default: cpu)")
    c.add_argument("--time-limit", type=float, default=60.0, help="seconds for the extraction (default 60)")
    c.add_argument("--report", help="also write the run's report.json to this (new) file")
    c.add_argument("--force", action="store_true", help=FORCE_HELP)
    c.set_defaults(fn=cmd_optimize)


def optimize_config(args: argparse.Namespace, base: Path) -> Any:
    """The run config `eqdsl optimize` runs (`config.parse_config` checks it as any YAML)."""
    from dataclasses import replace

    from eqdsl.config import parse_config
    from eqdsl.cost.targets import load_target
    from eqdsl.diagnostics import EqdslError

    program: dict[str, Any] = {"onnx": str(Path(args.model).resolve())}
    if args.shape:
        program["shapes"] = {name: list(dims) for name, dims in args.shape}
    if args.constant:
        program["constants"] = dict(args.constant)
    data = {**DEFAULTS, "ruleset": args.ruleset, "target": args.target, "program": program,
            "extract": {**DEFAULTS["extract"], "time_limit_s": args.time_limit}}
    try:
        load_target(args.target, base)  # read now (the run reads it late), so that its errors name the flag
    except EqdslError as err:
        raise EqdslError([replace(d, path="--target") if d.path == "target" else d  # else a path in its file
                          for d in err.diagnostics]) from None
    return parse_config(data, base / "optimize.yaml")


def cmd_optimize(args: argparse.Namespace) -> Work:
    from dataclasses import replace

    from eqdsl.onnx.read import model_file
    from eqdsl.output import Scratch

    model_file(Path(args.model))  # before any work: a missing model is the first thing to say
    scratch = FileScratch(Path(args.output), args.force, "--output")
    report = FileScratch(Path(args.report), args.force, "--report") if args.report else None
    config = optimize_config(args, Path.cwd())
    run_folder = scratch.folder / "run"
    config = replace(config, output=run_folder)

    def work() -> int:
        from eqdsl.pipeline import run_pipeline
        from eqdsl.report import write_outputs

        status.show(stderr)
        result = run_pipeline(config)
        written = write_outputs(result, Scratch(run_folder))
        return _publish(args, result, written, scratch, report)

    def cleanup() -> str | None:
        for s in (scratch, report):
            if s is not None:
                s.discard()
        return None

    return Work(work, cleanup)


def _publish(args: argparse.Namespace, result: Any, written: Path, scratch: FileScratch,
             report: FileScratch | None) -> int:
    import os

    target = Path(args.output)
    names = [target.name]
    failed = [done for done in result.finished.values() if not done.ok]
    if failed:  # a rewrite a check refused is not handed back: your model is, and why it was not
        _your_model_as_optimized(Path(args.model), written)
        for done in failed:
            for line, _ in done.lines:
                stderr.print(line, markup=False, highlight=False)
    os.replace(written / "optimized.onnx", scratch.folder / target.name)
    if (written / "optimized.onnx.data").exists():
        names.append(target.name + ".data")
        os.replace(written / "optimized.onnx.data", scratch.folder / names[-1])
    if report is not None:
        os.replace(written / "report.json", report.file)
        report.publish([report.target.name])
    place = scratch.publish(names)
    _print_table(Path(args.model), place, result)
    verdict = _refused(failed) if failed else _verdict(result)
    stdout.print(f"wrote {published(place, args.output)}: {verdict}", markup=False)
    return 1 if failed else 0


def _your_model_as_optimized(model: Path, written: Path) -> None:
    """The input model as `optimized.onnx` in eqdsl's own scratch folder (its weights beside it
    where it is too large for one file), in place of a rewrite a check refused."""
    from eqdsl.onnx.write import copy_model

    (written / "optimized.onnx.data").unlink(missing_ok=True)
    copy_model(model, written / "optimized.onnx")


CHECK_NAMES = {"validation": "validation", "export": "ONNX Runtime's check"}  # a stage's key → what it checked


def _refused(failed: list[Any]) -> str:
    checks = " and ".join(CHECK_NAMES.get(done.key, done.key) for done in failed)
    return (f"your model, unchanged: eqdsl's rewrite failed {checks} (the lines above say how), "
            "so it was not handed back (exit 1)")


def _print_table(before: Path, after: Path, result: Any) -> None:
    """ONNX operator counts before and after, file sizes, predicted and measured speed-up."""
    from rich.table import Table

    from eqdsl.onnx.read import operator_counts

    counts = [operator_counts(p) for p in (before, after)]
    table = Table("", "input", "optimized", title=f"eqdsl optimize {before.name}")
    for op in sorted(set(counts[0]) | set(counts[1])):
        table.add_row(op, str(counts[0][op]), str(counts[1][op]))
    table.add_row("nodes", str(sum(counts[0].values())), str(sum(counts[1].values())), style="bold")
    table.add_row("file size", _size(before), _size(after))
    runtime = _runtime(result)
    if "predicted_speedup" in runtime:  # against the input as the runtime runs it (its own fusions)
        table.add_row("predicted speed-up", "", f"{runtime['predicted_speedup']:.2f}×")
    for threads, speedup in sorted(runtime.get("speedup", {}).items()):
        table.add_row(f"measured, ORT CPU {threads} thread(s)", "", f"{speedup:.2f}×")
    stdout.print(table)


def _runtime(result: Any) -> dict:
    return result.finished["export"].report.get("runtime", {}) if "export" in result.finished else {}


def _verdict(result: Any) -> str:
    """What was handed back and why, from the export's measurement (1 thread, 95 % interval)."""
    runtime = _runtime(result)
    if not runtime.get("ok", False):
        return "not checked under ONNX Runtime"
    if runtime.get("same_operators"):
        return ("your model, unchanged: no rewrite won, and eqdsl's writing of it has the same operators, "
                "so it was not timed")
    if runtime.get("untimed"):
        return (f"your model, unchanged: the cost model predicts under 1 % gain from eqdsl's rewrite "
                f"({runtime['predicted_speedup']:.3f}×), so it was not timed")
    low, high = runtime["ratio_interval_1_thread"]
    measured = f"{runtime['speedup'][1]:.2f}× with 1 thread (time ratio in [{low:.3f}, {high:.3f}], 95 %)"
    if runtime.get("handed_back") == "input":
        return f"your model, unchanged: eqdsl's rewrite was not faster beyond noise, {measured}"
    faster = "faster beyond noise" if high < 1 else "not slower beyond noise"
    return f"{faster}, {measured}; predicted {runtime['predicted_speedup']:.2f}×"


def _size(path: Path) -> str:
    size = path.stat().st_size + (path.with_name(path.name + ".data").stat().st_size
                                  if path.with_name(path.name + ".data").exists() else 0)
    return f"{size / 1e6:.2f} MB" if size >= 1e5 else f"{size / 1e3:.1f} kB"

