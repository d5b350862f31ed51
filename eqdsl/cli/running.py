"""`eqdsl run`, `measure`, `sweep`, `report`, `doctor`: optimizing and what it reports."""
from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from eqdsl import status
from eqdsl.cli.common import (
    AT_LEAST_ONE,
    FORCE_HELP,
    NO_REF_HELP,
    Work,
    in_worker,
    setting_flag,
    stderr,
    stdout,
)
from eqdsl.diagnostics import EqdslError


def cmd_run(args: argparse.Namespace) -> Work:
    from eqdsl.config import load_config
    from eqdsl.output import Scratch, check_output
    from eqdsl.pipeline import config_inputs, run_pipeline
    from eqdsl.report import print_summary, run_json, write_outputs

    if Path(args.config).suffix.lower() == ".onnx":
        raise EqdslError.one(f"{args.config} is an ONNX model, not a run config; `eqdsl optimize {args.config} "
                             "-o OUT.onnx` optimizes it without one (or name it in a config: program: {onnx: ...})")
    config = load_config(Path(args.config), [*args.set, *flag_overrides(args)])
    output = Path(args.output) if args.output else config.output
    resolved = check_output(output, config_inputs(config), args.force)  # before the run, not after it
    config = replace(config, output=resolved)  # the folder written, as `report.json`'s effective config says
    scratch = Scratch(resolved, args.force)

    def progress(report) -> None:
        if not args.quiet:
            matches = sum(report.matches.values())
            classes = "" if report.classes is None else f", {report.classes} classes"
            extra = f" (rolled back: {report.rollback.value})" if report.rollback else ""
            stderr.print(f"  iteration {report.index} [{report.ruleset}]: {report.nodes} nodes"
                         f"{classes}, {matches} matches, {report.seconds:.3f} s{extra}", markup=False)

    def work() -> int:
        status.show(None if args.quiet else stderr)
        result = run_pipeline(config, progress)
        written = write_outputs(result, scratch)
        if args.json:
            print(json.dumps(run_json(result, written)))
            return 0 if all(done.ok for done in result.finished.values()) else 1
        print_summary(result, stdout)
        if written != resolved:
            stderr.print(f"warning: files appeared in {output} during the run; it was left alone and "
                         f"the results were written to {written}", markup=False)
        if scratch.kept:
            stderr.print(f"note: --force kept {len(scratch.kept)} file(s) eqdsl did not write in {written}: "
                         f"{', '.join(scratch.kept[:5])}{' …' if len(scratch.kept) > 5 else ''}", markup=False)
        stdout.print(f"report: {written / 'report.json'}")
        return 0 if all(done.ok for done in result.finished.values()) else 1

    return Work(work, scratch.discard)


def flag_overrides(args: argparse.Namespace) -> list[tuple[str, object]]:
    """The flags of `run` / `execute` as edits of the config's YAML (`config.load_config`), so
    they are checked, and recorded in the effective configuration, as its own keys are."""
    edits: list[tuple[str, object]] = []
    if args.validate:  # on, keeping the file's settings
        edits.append(("validate", lambda old: True if old in (None, False) else old))
    if args.no_ref:  # only where validation is on
        edits.append(("validate", lambda old: _with_items(old, {"run_ref": False}) if old else old))
    if getattr(args, "execute", False):  # `eqdsl execute`: on, the flags over the file's settings
        given = {k: v for k, v in {"device": args.device, "runs": args.runs}.items() if v}
        edits.append(("execute", lambda old: _with_items(old or True, given, shorthand="device")))
    return edits


def _with_items(value: object, items: dict, shorthand: str | None = None) -> object:
    """A section's YAML value (`true`, a mapping, a `shorthand` string) with `items` set; any
    other value as it is, for the section's reader to refuse."""
    if value is True:
        return dict(items)
    if isinstance(value, str) and shorthand is not None:
        return {shorthand: value, **items}
    return {**value, **items} if isinstance(value, dict) else value


def cmd_measure(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from eqdsl.config import load_config
    from eqdsl.pipeline import measure_costs

    config = load_config(Path(args.config))
    columns = (TextColumn("timing {task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=stderr, transient=True) as bar:
        task = bar.add_task("operators", total=None)

        def timing(done: int, total: int, op: str) -> None:
            bar.update(task, completed=done, total=total, description=op or "done")

        result = measure_costs(config, timing)
    from eqdsl.cost.measured import noisy_text

    m = result.measured
    assert m is not None and result.outcome is not None
    print(f"{m.device}: {len(m.stats.timed)} operator configuration(s) timed, {m.stats.cached} already in "
          f"{m.cache.path} ({m.cache.count(m.device)} for this device); e-graph of {result.outcome.nodes} "
          f"nodes; priced by cost rules (no kernel): {', '.join(sorted(m.stats.rule_priced)) or 'none'}"
          + noisy_text(m.stats))
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from dataclasses import replace as with_

    from eqdsl.sweep.run import run_sweep
    from eqdsl.sweep.spec import load_sweep
    from eqdsl.sweep.table import with_ratios, write_plots, write_tables

    sweep = load_sweep(Path(args.sweep))
    if args.ray is not None:
        sweep = with_(sweep, executor="ray", ray_address=args.ray or None)
    if args.workers is not None:
        sweep = with_(sweep, workers=args.workers)
    print(f"sweep {args.sweep}: {len(sweep.tasks)} task(s) on {sweep.executor} ({sweep.workers} at once)")

    def progress(task, result, done: int, total: int) -> None:
        what = ", ".join(f"{k}={v}" for k, v in task.labels)
        if result.get("ok"):
            ratio = with_ratios(result).get("speedup", 1.0)
            stdout.print(f"[{done}/{total}] {what}: {ratio:.2f}× (predicted), "
                         f"{result['optimization_seconds']:.1f} s", markup=False)
        else:
            stdout.print(f"[{done}/{total}] {what}: FAILED: {result.get('error', '')[:300]}", markup=False)

    results = run_sweep(sweep, progress)
    table = write_tables(sweep.output, sweep, results)
    note = write_plots(sweep.output, sweep, results)
    failed = sum(row["status"] != "ok" for row in table)
    print(f"{len(table) - failed} ok, {failed} failed; {sweep.output / 'results.md'}, results.csv; {note}")
    return 1 if failed else 0


def cmd_report(args: argparse.Namespace) -> int:
    from eqdsl.report_page import write_page

    print(f"wrote {write_page(Path(args.folder))}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from eqdsl.execute.doctor import report

    for label, value in report():
        print(f"{label:<22} {value}")
    return 0


def _run_options(c, validate_help: str) -> None:
    c.add_argument("config", help="a run config (.yaml): ruleset, program, schedule, extract, output, ...")
    c.add_argument("-o", "--output", help="output folder (default: the config's `output`)")
    c.add_argument("--quiet", action="store_true", help="no progress lines")
    c.add_argument("--validate", action="store_true", help=validate_help)
    c.add_argument("--force", action="store_true", help=FORCE_HELP)
    c.add_argument("--no-ref", action="store_true", help=NO_REF_HELP)
    c.add_argument("--json", action="store_true",
                   help="print one JSON object on stdout instead of the summary (schema: docs/configuration.md)")
    c.add_argument("--set", action="append", type=setting_flag, default=[], metavar="KEY=VALUE",
                   help="override one config key, checked as the file's own (--set schedule.iter_limit=5, "
                        "--set 'extract={method: greedy}'); repeatable")
    c.set_defaults(fn=cmd_run)


def _run_commands(sub) -> None:
    c = sub.add_parser("run", help="optimize the program a config.yaml names")
    _run_options(c, "check the extracted program against the input on random data")
    c = sub.add_parser("execute", help="optimize as `run` does, then run input and optimized programs with "
                                       "eqdsl's kernels: outputs compared, both timed")
    _run_options(c, "also translation-validate")
    c.add_argument("--device", choices=["cpu", "cuda"],
                   help="whose kernels run the programs: cpu (Numba, this machine) or cuda (a GPU); default: "
                        "the config's `execute`, else cpu")
    c.add_argument("--runs", type=AT_LEAST_ONE,
                   help="timed runs of each program (median); default: the config's `execute`, else 10")
    c.set_defaults(execute=True)
    c = sub.add_parser("measure", help="time every operator configuration a run's e-graph holds (fill the cache)")
    c.add_argument("config", help="a run config whose target measures, e.g. target: {measure: ort}")
    c.set_defaults(fn=in_worker(cmd_measure))
    c = sub.add_parser("sweep", help="run many configs (models × schedules × seeds × targets): one table, plots")
    c.add_argument("sweep", help="a sweep.yaml (base run config, grid, seeds, output, workers, executor)")
    c.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                   help="run the tasks on Ray (a cluster's address; none: start Ray here)")
    c.add_argument("--workers", type=AT_LEAST_ONE, help="tasks at once (default: the file's `workers`)")
    c.set_defaults(fn=in_worker(cmd_sweep))
    c = sub.add_parser("report", help="write report.html (one self-contained page: programs as graphs, cost by "
                                      "operator, iterations, extraction, measured times) into a run's output folder")
    c.add_argument("folder", help="the output folder of an `eqdsl run` (it holds report.json)")
    c.set_defaults(fn=in_worker(cmd_report))
    c = sub.add_parser("doctor", help="print what this machine offers eqdsl: packages, CPU, CUDA GPU")
    c.set_defaults(fn=in_worker(cmd_doctor))

