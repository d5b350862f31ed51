"""The `eqdsl` command: check, compile, run, execute, measure, sweep, report, doctor, verify, extract,
import, export.

Exit codes: 0 success, 2 a user mistake (rendered diagnostics, no traceback), 1 a failed check
(verify, validation) or an internal error, 130 interrupted (SIGINT / SIGTERM).

Every command's work runs in a worker process (`eqdsl.worker.supervise`): Ctrl-C stops any stage
within a poll interval, and what was half-written is removed. A command function either finishes
quickly in the supervisor (returns an exit code) or returns the `Work` to run in the worker.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, cast

from rich.console import Console

from eqdsl import status
from eqdsl.config import ValidateConfig
from eqdsl.diagnostics import EqdslError
from eqdsl.execute.executor import ExecuteSettings
from eqdsl.extract.registry import EXTRACTORS, ExtractConfig, extractor_names, option_classes
from eqdsl.fields import add_flags, flag_values
from eqdsl.output import FileScratch, remove_prepared

stderr = Console(stderr=True, highlight=False, soft_wrap=True)
stdout = Console(highlight=False, soft_wrap=True)


@dataclass(frozen=True)
class Work:
    """A command's long part, run in the worker; `cleanup` runs in the supervisor afterwards."""

    run: Callable[[], int]
    cleanup: Callable[[], str | None] = lambda: None  # a line to say instead of "nothing written", if any


def cmd_check(args: argparse.Namespace) -> int:
    from eqdsl.diagnostics import Diagnostic
    from eqdsl.frontend import load_language
    from eqdsl.frontend.check.lints import guard_warnings
    from eqdsl.verify.shape_probe import shape_changing_rules

    lang = load_language(args.file)
    for warning in guard_warnings(lang):
        print(warning.render(), file=sys.stderr)
    unsound = shape_changing_rules(lang)
    if unsound:
        raise EqdslError([Diagnostic(f"rule {rule.name} unions terms of different shapes: {example}; "
                                     "expected both sides to have the same shape", rule.span)
                          for rule, example in unsound])
    single, multi = len(lang.single_rules), len(lang.multi_rules)
    print(f"ok: language {lang.name}: {len(lang.sorts)} sort(s), {len(lang.ops)} operator(s), "
          f"{len(lang.rules)} rule(s) ({single} single, {multi} multi), "
          f"{len(lang.shapes)} shape rule(s), {len(lang.costs)} cost rule(s), "
          f"{len(lang.programs)} program(s)"
          + (f", target params: {', '.join(lang.params)}" if lang.params else ""))
    if args.rules:
        multi_names = {r.name for r in lang.multi_rules}
        for rule in lang.rules:
            print(f"  {rule.name}  ({'multi' if rule.name in multi_names else 'single'}-pattern, {rule.span})")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    import shutil

    # Hypothesis caches into ./.hypothesis by default: never into the user's folder
    scratch = tempfile.mkdtemp(prefix="eqdsl-hypothesis-")
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", scratch)
    try:
        return _verify(args)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # our own temporary folder


def _verify(args: argparse.Namespace) -> int:
    import numpy as np

    from eqdsl.frontend import load_language
    from eqdsl.verify.rules import Status, operator_rules, verify_rule
    from eqdsl.verify.semantics import load_semantics

    lang = _with_target(load_language(args.file), args.target)
    sem = load_semantics(lang, run_ref=not args.no_ref)
    rules = operator_rules(lang, sem) + list(lang.rules)
    if args.rule:
        rules = [r for r in rules if r.name in args.rule]
        missing = sorted(set(args.rule) - {r.name for r in rules})
        if missing:
            raise EqdslError.one(f"no rule named {', '.join(missing)} in {args.file}")
    failed = 0
    for rule in rules:
        res = verify_rule(lang, sem, rule, args.examples, args.seed)
        stdout.print(f"{res.status.value:7} {res.name:24} {res.examples:5} examples  {res.seconds:6.2f} s",
                     markup=False)
        if res.status is not Status.PASSED:
            failed += 1
        if res.counterexample is not None:
            c = res.counterexample
            sizes = ", ".join(f"?{v}: {list(s)}" for v, s in sorted(c.sizes.items()))
            values = ", ".join(f"{k} = {v}" for k, v in sorted(c.values.items()))
            stdout.print(f"        {c.message}; max error {c.max_error:.3g}\n        shapes {sizes}"
                         + (f"; values {values}" if values else ""), markup=False)
            for name, value in sorted(c.inputs.items()):
                shown = np.array2string(np.asarray(value), threshold=64, precision=6, separator=", ")
                stdout.print(f"        ?{name} = " + shown.replace("\n", "\n          "), markup=False)
            stdout.print(f"        reproduce: eqdsl verify {args.file} --rule {res.name} --seed {args.seed} "
                         f"--examples {args.examples}", markup=False)
        elif res.status is Status.VACUOUS:
            stdout.print("        no valid example could be drawn: the rule never applies", markup=False)
    stdout.print(f"{len(rules) - failed}/{len(rules)} rules (operator checks op:* included) passed, "
                 f"seed {args.seed}", markup=False)
    return 1 if failed else 0


def _with_target(lang, target: str | None):
    """The language with the target params its rules read bound (`eqdsl.ir.params`); without
    `--target`, such rules are an error naming them."""
    from eqdsl.cost.targets import bind_target, load_target
    from eqdsl.ir.params import bind_params, params_in_rules

    reading = params_in_rules(lang)
    if target is None:
        if reading:
            rule, names = next(iter(reading.items()))
            raise EqdslError.one(f"rule '{rule}' reads target param(s) {', '.join(sorted(names))}: "
                                 "expected --target NAME (a shipped target or a .yaml file)")
        return lang
    return bind_params(lang, bind_target(lang, load_target(target, Path.cwd())))


def cmd_compile(args: argparse.Namespace) -> int:
    from eqdsl.egglog.lower import load_program, lower_language
    from eqdsl.frontend import load_language

    lang = _with_target(load_language(args.file), args.target)
    lowered = lower_language(lang)
    sys.stdout.write(lowered.text)
    for program in lang.programs.values():
        sys.stdout.write(f";; ---- program {program.name} ----\n" + load_program(program, lowered))
    return 0


def cmd_run(args: argparse.Namespace) -> Work:
    from eqdsl.config import load_config
    from eqdsl.output import Scratch, check_output
    from eqdsl.pipeline import config_inputs, run_pipeline
    from eqdsl.report import print_summary, write_outputs

    config = load_config(Path(args.config))
    if args.validate and config.validate is None:
        config = replace(config, validate=ValidateConfig())
    if getattr(args, "device", None) is not None:  # `eqdsl execute`
        config = replace(config, execute=ExecuteSettings(args.device, args.runs))
    if args.no_ref and config.validate is not None:
        config = replace(config, validate=replace(config.validate, run_ref=False))
    output = Path(args.output) if args.output else config.output
    resolved = check_output(output, config_inputs(config), args.force)  # before the run, not after it
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
    from eqdsl.sweep.table import write_plots, write_tables

    sweep = load_sweep(Path(args.sweep))
    if args.ray is not None:
        sweep = with_(sweep, executor="ray", ray_address=args.ray or None)
    if args.workers is not None:
        sweep = with_(sweep, workers=args.workers)
    print(f"sweep {args.sweep}: {len(sweep.tasks)} task(s) on {sweep.executor} ({sweep.workers} at once)")

    def progress(task, result, done: int, total: int) -> None:
        what = ", ".join(f"{k}={v}" for k, v in task.labels)
        if result.get("ok"):
            stdout.print(f"[{done}/{total}] {what}: {result['speedup_pct']:.2f} % cheaper, "
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


def cmd_extract(args: argparse.Namespace) -> Work:
    return _writing(args, "out", "--out", lambda scratch: _extract(args, scratch))


def _writing(args: argparse.Namespace, key: str, flag: str, work: Callable[[FileScratch | None], int]) -> Work:
    """A command that writes the file `args.<key>` (if given): refused before any work if it
    exists (without --force); written beside it first, renamed into place at the end."""
    path = getattr(args, key)
    scratch = None if path is None else FileScratch(Path(path), args.force, flag)
    return Work(lambda: work(scratch), scratch.discard if scratch is not None else lambda: None)


def _extract(args: argparse.Namespace, scratch: FileScratch | None) -> int:
    from eqdsl.extract.egraph import read_problem
    from eqdsl.extract.registry import make_extractor, read_extract
    from eqdsl.report import extraction_json

    problem = read_problem(Path(args.egraph))
    given = {k: v for section in [ExtractConfig, *option_classes()] for k, v in flag_values(args, section).items()}
    cfg = read_extract({**given, "method": args.extractor}, "command line")
    status.show(stderr)
    with status.stage(f"extract:{args.extractor}"):
        e = make_extractor(args.extractor, cfg, "--extractor").extract(problem)
    bound = "n/a" if e.bound is None else f"{e.bound:g}"
    gap = "n/a" if e.gap is None else f"{100 * e.gap:.2f} %"
    print(f"{args.egraph}: {problem.num_classes} classes, {len(problem.nodes)} nodes, "
          f"{len(problem.roots)} root(s)")
    print(f"extractor {e.method}: cost {e.cost:g}, status {e.status.value}, bound {bound}, "
          f"gap {gap}, {e.seconds:.3f} s" + (f" ({e.note})" if e.note else ""))
    if scratch is not None:
        written = scratch.write_text(json.dumps(extraction_json(e, problem), indent=2) + "\n")
        print(f"choices written to {_published(written, args.out)}")
    return 0


def cmd_import(args: argparse.Namespace) -> Work:
    if args.system == "onnx":
        return _writing(args, "output", "--output", lambda scratch: _import_onnx(args, scratch))
    if args.output is None:
        raise EqdslError.one("import tensat: expected -o/--output, the .eqr file to write")
    return _writing(args, "output", "--output", lambda scratch: _import_tensat(args, cast(FileScratch, scratch)))


def _import_tensat(args: argparse.Namespace, scratch: FileScratch) -> int:
    from eqdsl.frontend import check_modules, load_modules, resolve_ruleset
    from eqdsl.frontend.parse import parse_text
    from eqdsl.importers.taso import import_rules

    text = import_rules(Path(args.file), Path(args.multi) if args.multi else None,
                        Path(args.predefined) if args.predefined else None)
    out = Path(args.output)
    # check before writing: a file that does not check is never written
    modules = load_modules(resolve_ruleset("tensor"))
    lang = check_modules(modules + [parse_text(text, str(out))])
    written = scratch.write_text(text)
    imported = [r for r in lang.rules if r.span.file == str(out)]  # not the included languages' own
    print(f"wrote {_published(written, out)}: {sum(not r.is_multi for r in imported)} single-pattern and "
          f"{sum(r.is_multi for r in imported)} multi-pattern rules")
    return 0


def _import_onnx(args: argparse.Namespace, scratch: FileScratch | None) -> int:
    from collections import Counter

    from eqdsl.frontend import load_language
    from eqdsl.onnx import require_onnx

    require_onnx()
    from eqdsl.ir.text import program_text
    from eqdsl.onnx.read import read_onnx

    if args.system == "onnx" and (args.multi or args.predefined):
        raise EqdslError.one("import onnx: --multi and --predefined are for `import tensat`")
    imported = read_onnx(Path(args.file), load_language("tensat"), dict(args.shape or []), dict(args.constant or []))
    for note in imported.notes:
        print(f"note: {note}", file=sys.stderr)
    text = f"# imported from {args.file} by `eqdsl import onnx`\n" + program_text(imported.program)
    counts = Counter(n.op for n in imported.program.nodes)
    summary = ", ".join(f"{n} {op}" for op, n in sorted(counts.items()) if op not in ("input", "weight"))
    if scratch is None:
        print(text, end="")
    else:
        written = scratch.write_text(text)
        print(f"wrote {_published(written, args.output)}: program {imported.program.name}, "
              f"{len(imported.weights)} weights; {summary}")
    return 0


def cmd_export(args: argparse.Namespace) -> Work:
    return _writing(args, "output", "--output", lambda scratch: _export(args, cast(FileScratch, scratch)))


def _export(args: argparse.Namespace, scratch: FileScratch) -> int:
    from eqdsl.frontend import load_language
    from eqdsl.onnx import require_onnx
    from eqdsl.onnx.weights import random_weights
    from eqdsl.onnx.write import write_program

    require_onnx()

    lang = load_language(args.ruleset, Path.cwd())
    program = _export_program(args, lang)
    weights = _weights_from(Path(args.weights), lang) if args.weights else random_weights(program, args.seed)
    files = write_program(lang, program, weights, scratch.file)
    written = scratch.publish(files)  # a weights file is checked like the model: never over a file not to replace
    source = f"weights from {args.weights}" if args.weights else "random weights (seeded)"
    shown = [_published(written, args.output), *files[1:]]
    print(f"wrote {', '.join(shown)}: program {program.name}, {len(program.nodes)} nodes, {source}")
    return 0


def _published(written: Path, wanted: str | Path) -> str:
    """Where an output file went; a warning on stderr when a file that appeared at `wanted`
    during the work sent it to a free name beside it (`FileScratch.publish`)."""
    if Path(written).name != Path(wanted).name:
        stderr.print(f"warning: {wanted} appeared while eqdsl ran; it was left alone and the result "
                     f"was written to {written}", markup=False)
    return str(written)


def _export_program(args: argparse.Namespace, lang):
    from eqdsl.frontend import load_program_file
    from eqdsl.sources.models import ModelSource

    if (args.program is None) == (args.builder is None):
        raise EqdslError.one("export onnx: expected a PROGRAM.eqr or --builder NAME (one of them)")
    if args.builder is not None:
        from eqdsl.sources.base import ProgramRef

        params = tuple(_param(p) for p in args.param or [])
        return ModelSource(args.builder).load(ProgramRef(args.builder, params, Path.cwd()), lang).program
    programs = load_program_file(Path(args.program), lang)
    if args.name is None and len(programs) != 1:
        raise EqdslError.one(f"{args.program}: expected one program (or --name), found {', '.join(programs)}")
    name = args.name or next(iter(programs))
    if name not in programs:
        raise EqdslError.one(f"{args.program}: no program named {name!r}; found {', '.join(programs)}")
    return programs[name]


def _int_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None


def _named_ints(text: str) -> tuple[str, tuple[int, ...]]:
    name, _, values = text.partition("=")
    if not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=INT,INT,... got {text!r}")
    return name, tuple(_int_list(values))


def _param(text: str) -> tuple[str, int]:
    key, _, value = text.partition("=")
    if not value.isdigit():
        raise EqdslError.one(f"--param: expected NAME=INT, got {text!r}")
    return key, int(value)


def _shape_flag(text: str) -> tuple[str, tuple[int, ...]]:
    name, _, dims = text.partition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not name or not shape or any(d <= 0 for d in shape):
        raise argparse.ArgumentTypeError(f"expected INPUT=D1,D2,... with dimensions > 0, got {text!r}")
    return name, shape


def _constant_flag(text: str) -> tuple[str, float | int]:
    name, _, value = text.partition("=")
    try:
        number = float(value) if any(c in value for c in ".eE") else int(value)
    except ValueError:
        number = None
    if not name or number is None:
        raise argparse.ArgumentTypeError(f"expected INPUT=NUMBER, got {text!r}")
    return name, number


def _weights_from(path: Path, lang):
    """The weights of a program imported from `path` (its initializers and what import derives)."""
    from eqdsl.onnx.read import read_onnx

    return read_onnx(path, lang).weights


def in_worker(cmd: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], Work]:
    return lambda args: Work(lambda: cmd(args))


def _number(kind: type, low: float, expected: str) -> Callable[[str], float]:
    """An argparse type: a finite number ≥ low (argparse reports the flag and the value)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not (value >= low) or value in (float("inf"),):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value
    return parse


AT_LEAST_ONE = _number(int, 1, "an integer ≥ 1")
AT_LEAST_ZERO = _number(int, 0, "an integer ≥ 0")
POSITIVE = _number(float, 1e-9, "a number > 0")


NO_REF_HELP = ("never run the ruleset's <name>_ref.py (reference semantics are Python: running an "
               "untrusted ruleset's runs its code); a language that needs one is then an error")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="eqdsl", description="Equality saturation for tensor programs.")
    sub = p.add_subparsers(dest="command", required=True)
    _language_commands(sub)
    _synthesis_commands(sub)
    _run_commands(sub)
    _file_commands(sub)
    return p


FORCE_HELP = ("write the results into a folder beside files eqdsl did not write: they are kept, never "
              "deleted or overwritten (one named like a result, e.g. report.json, is refused)")
TARGET_HELP = "values for the target params the rules read (a shipped name or a .yaml)"


def _language_commands(sub) -> None:
    c = sub.add_parser("check", help="check a .eqr file; print every error")
    c.add_argument("file", help="a .eqr path or a shipped ruleset name")
    c.add_argument("--rules", action="store_true", help="list every rule: name, single- or multi-pattern, where")
    c.set_defaults(fn=in_worker(cmd_check))
    c = sub.add_parser("compile", help="print the egglog program a .eqr file lowers to")
    c.add_argument("file", help="a .eqr path or a shipped ruleset name")
    c.add_argument("--target", help=TARGET_HELP)
    c.set_defaults(fn=in_worker(cmd_compile))
    c = sub.add_parser("verify", help="check every rule of a .eqr file against the reference semantics")
    c.add_argument("file", help="a .eqr path or a shipped ruleset name")
    c.add_argument("--rule", action="append", help="only this rule (repeatable)")
    c.add_argument("--examples", type=AT_LEAST_ONE, default=100,
                   help="valid examples per rule (default 100)")
    c.add_argument("--seed", type=AT_LEAST_ZERO, default=0, help="seed of the random examples (default 0)")
    c.add_argument("--target", help=TARGET_HELP)
    c.add_argument("--no-ref", action="store_true", help=NO_REF_HELP)
    c.set_defaults(fn=in_worker(cmd_verify))


def _synthesis_commands(sub) -> None:
    c = sub.add_parser("derive", help="which rules of B the rules of A prove by equality saturation")
    c.add_argument("a", help="the rules that prove (a .eqr path or a shipped ruleset name)")
    c.add_argument("b", help="the rules to prove: those written in this file (not the ones it includes)")
    c.add_argument("--iter-limit", type=AT_LEAST_ONE, default=8, help="iterations per rule (default 8)")
    c.add_argument("--node-limit", type=AT_LEAST_ONE, default=20_000, help="e-nodes per rule (default 20000)")
    c.add_argument("--time-limit", type=POSITIVE, default=10.0, help="seconds per rule (default 10)")
    c.add_argument("--k-multi", type=AT_LEAST_ZERO, default=1,
                   help="iterations with A's multi-pattern rules (default 1, as TENSAT)")
    c.add_argument("--all", action="store_true", help="print every rule's verdict, not only those not derived")
    c.set_defaults(fn=in_worker(cmd_derive))
    c = sub.add_parser("synthesize", help="infer a small verified rule set from a language's reference semantics")
    c.add_argument("language", help="a .eqr path or a shipped ruleset name (its operators and semantics)")
    c.add_argument("-o", "--output", required=True, help="the .eqr file to write (a new file)")
    c.add_argument("--ops", type=lambda t: [o for o in t.split(",") if o],
                   help="operators to use, constant operators (scalar, num) too (default: all)")
    c.add_argument("--size", type=AT_LEAST_ONE, default=2, help="operators per term, at most (default 2)")
    c.add_argument("--vars", type=AT_LEAST_ONE, default=3, help="variables per sort (default 3)")
    c.add_argument("--ints", type=_int_list, default=[0, 1, 2], help="Int literals to try (default 0,1,2)")
    c.add_argument("--values", type=_named_ints, action="append", default=[], metavar="NAME=V,V",
                   help="the Int literals for parameters of this name instead (--values act=0,2); repeatable")
    c.add_argument("--shape", type=_int_list, action="append",
                   help="the shape of every variable of a sort with shapes (default 3,3); give it again for "
                        "one more enumeration at that shape (--shape 3,3 --shape 2,2,3,3)")
    c.add_argument("--examples", type=AT_LEAST_ONE, default=100, help="verify's examples per rule (default 100)")
    c.add_argument("--time-limit", type=POSITIVE, default=600.0, help="seconds in all (default 600)")
    c.add_argument("--seed", type=AT_LEAST_ZERO, default=0, help="seed of the fingerprint inputs (default 0)")
    c.add_argument("--no-ref", action="store_true", help=NO_REF_HELP)
    c.add_argument("--force", action="store_true", help="replace --output if it exists")
    c.set_defaults(fn=cmd_synthesize)


def cmd_synthesize(args: argparse.Namespace) -> Work:
    """Like `_writing`, but a stop keeps the rules verified so far: the worker writes them into
    the scratch file after each kept rule, and the clean-up publishes what is there."""
    scratch = FileScratch(Path(args.output), args.force, "--output")

    def keep_verified() -> str | None:
        kept = None
        if scratch.file.is_file():
            rules = sum(line.startswith("rule ") for line in scratch.file.read_text().splitlines())
            names = [n for n in (scratch.target.name, scratch.target.stem + "_ref.py")
                     if (scratch.folder / n).is_file()]
            kept = f"interrupted: kept the {rules} rules verified so far in {scratch.publish(names)}"
        scratch.discard()
        return kept

    def run() -> int:
        # Hypothesis (verify) caches into ./.hypothesis by default: into the worker's private temporary folder
        os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", tempfile.mkdtemp(prefix="eqdsl-hypothesis-"))
        return _synthesize(args, scratch)

    return Work(run, keep_verified)


def _synthesize(args: argparse.Namespace, scratch: FileScratch) -> int:
    import time

    from eqdsl.frontend import check_modules, load_language, load_modules, resolve_ruleset
    from eqdsl.frontend.parse import parse_text
    from eqdsl.output import write_file_atomically
    from eqdsl.schedule.runner import Limits
    from eqdsl.synth.enumerate import Space
    from eqdsl.synth.synthesize import declarations, rules_text, semantics_companion, synthesize
    from eqdsl.verify.semantics import load_semantics

    lang = load_language(args.language)
    shapes = tuple(tuple(shape) for shape in args.shape or [[3, 3]])
    space = Space(args.size, args.vars, tuple(args.ints), tuple(args.ops or ()), seed=args.seed, shapes=shapes,
                  params=tuple(args.values))
    files = [scratch.target.name]
    if (companion := semantics_companion(lang)) is not None:  # a user's semantics: found from beside the file
        files.append(scratch.target.stem + "_ref.py")
        (scratch.folder / files[-1]).write_text(companion)
    declared = declarations(lang, lang.name)

    def checkpoint(partial) -> None:  # what a stop keeps (`cmd_synthesize`)
        header = "STOPPED before the end: the rules verified so far, written after each kept rule."
        write_file_atomically(scratch.file, rules_text(lang, partial, header, declared))

    status.show(stderr)
    with status.stage("synthesize"):
        found = synthesize(lang, load_semantics(lang, run_ref=not args.no_ref), space, Limits(8, 20_000, 5),
                           args.examples, time.monotonic() + args.time_limit, lambda note: status.update(note=note),
                           checkpoint)
    header = (f"Synthesized by `eqdsl synthesize {args.language} --size {args.size} --vars {args.vars} --ints "
              f"{','.join(map(str, args.ints))}{''.join(' --shape ' + ','.join(map(str, s)) for s in shapes)}"
              f"{''.join(f' --values {n}=' + ','.join(map(str, v)) for n, v in args.values)}"
              f"{' --ops ' + ','.join(args.ops) if args.ops else ''}` from the "
              f"reference semantics of {lang.name}:\n{found.terms} terms in {found.classes} fingerprint classes, "
              f"{found.candidates} candidate rules; {len(found.kept)} kept, each passing `eqdsl verify` "
              f"({args.examples} examples); {found.rejected} failed `verify`."
              + ("\nNone is derivable from the others." if found.complete else
                 "\nSTOPPED at --time-limit: the rules verified so far (each not derivable from those kept before "
                 "it; the last pass, which drops a rule the later ones derive, did not finish)."))
    text = rules_text(lang, found, header, declared)
    base = [] if f"include {lang.name}" not in text else load_modules(resolve_ruleset(lang.name))
    check_modules([*base, parse_text(text, str(args.output))])  # never write a file that does not check
    write_file_atomically(scratch.file, text)
    written = scratch.publish(files)
    also = f" (and {files[1]}, which finds {lang.name}'s semantics)" if len(files) > 1 else ""
    stopped = "" if found.complete else "; stopped at --time-limit"
    stdout.print(f"wrote {_published(written, args.output)}{also}: {len(found.kept)} rules ({found.rejected} "
                 f"candidates failed verify) in {found.seconds:.1f} s{stopped}", markup=False)
    return 0


def cmd_derive(args: argparse.Namespace) -> int:
    from eqdsl.frontend import load_language
    from eqdsl.schedule.runner import Limits
    from eqdsl.synth.derive import Verdict, derive, own_rules

    a, b = load_language(args.a), load_language(args.b)
    limits = Limits(args.iter_limit, args.node_limit, args.time_limit)

    def progress(done: int, total: int, d) -> None:
        status.update(step=f"{done}/{total}", note=d.rule)
        if args.all or d.verdict is not Verdict.DERIVED:
            why = f" ({d.why})" if d.why else ""
            stdout.print(f"{d.verdict.value:16} {d.rule}{why}", markup=False)

    status.show(stderr)
    with status.stage("derive"):
        found = derive(a, own_rules(b), limits, args.k_multi, progress)
    derived = sum(d.verdict is Verdict.DERIVED for d in found)
    share = 100.0 * derived / len(found) if found else 0.0
    stdout.print(f"derived {derived} of {len(found)} rules ({share:.1f} %)", markup=False)
    return 0


def _run_options(c, validate_help: str) -> None:
    c.add_argument("config", help="a run config (.yaml): ruleset, program, schedule, extract, output, ...")
    c.add_argument("--output", help="output folder (default: the config's `output`)")
    c.add_argument("--quiet", action="store_true", help="no progress lines")
    c.add_argument("--validate", action="store_true", help=validate_help)
    c.add_argument("--force", action="store_true", help=FORCE_HELP)
    c.add_argument("--no-ref", action="store_true", help=NO_REF_HELP)
    c.set_defaults(fn=cmd_run)


def _run_commands(sub) -> None:
    c = sub.add_parser("run", help="optimize the program a config.yaml names")
    _run_options(c, "check the extracted program against the input on random data")
    c = sub.add_parser("execute", help="optimize as `run` does, then run input and optimized programs with "
                                       "eqdsl's kernels: outputs compared, both timed")
    _run_options(c, "also translation-validate")
    c.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="whose kernels run the programs: cpu (Numba, this machine) or cuda (a GPU)")
    c.add_argument("--runs", type=AT_LEAST_ONE, default=10, help="timed runs of each program (median)")
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


def _file_commands(sub) -> None:
    c = sub.add_parser("extract", help="extract from an egraph-serialize JSON file")
    c.add_argument("egraph", help="an egraph-serialize JSON file (egglog's, extraction-gym's)")
    c.add_argument("--extractor", choices=extractor_names(), default="cpsat",
                   help="; ".join(f"{k.name}: {k.summary}" for k in map(EXTRACTORS.get, extractor_names()) if k)
                   + " (default: cpsat)")
    taken: set[str] = set()
    add_flags(c, ExtractConfig, taken)
    for section, kinds in option_classes().items():  # every kind's own `extract:` keys, as flags
        add_flags(c, section, taken, " and ".join(kinds))
    c.add_argument("--out", help="write the chosen nodes as JSON here (a new file)")
    c.add_argument("--force", action="store_true", help="replace --out if it exists")
    c.set_defaults(fn=cmd_extract)
    c = sub.add_parser("import", help="import TENSAT rules or an ONNX model")
    c.add_argument("system", choices=["tensat", "onnx"], help="what FILE is: TENSAT rules or an ONNX model")
    c.add_argument("file", help="TENSAT single-pattern rules (converted.txt), or an ONNX model")
    c.add_argument("--multi", help="TENSAT multi-pattern rules (converted_multi.txt)")
    c.add_argument("--predefined", help="TENSAT's predefined rules (predefined.txt)")
    c.add_argument("--shape", action="append", type=_shape_flag, metavar="INPUT=D1,D2,...",
                   help="onnx: the dimensions of an input with dynamic ones (repeatable), e.g. x=1,3,224,224")
    c.add_argument("--constant", action="append", type=_constant_flag, metavar="INPUT=NUMBER",
                   help="onnx: fix a (non-float) input to a value (repeatable), e.g. sr=16000")
    c.add_argument("-o", "--output", help="the .eqr file to write (a new file; onnx: default stdout)")
    c.add_argument("--force", action="store_true", help="replace --output if it exists")
    c.set_defaults(fn=cmd_import)
    c = sub.add_parser("export", help="write a program (a .eqr file or a model builder) as an ONNX model")
    c.add_argument("format", choices=["onnx"], help="the format to write")
    c.add_argument("program", nargs="?", help="a .eqr file holding `program` blocks")
    c.add_argument("--name", help="which program of the file")
    c.add_argument("--builder", help="a model builder (vgg19, bert, vit_base, ...)")
    c.add_argument("--param", action="append", help="a builder parameter NAME=INT (repeatable)")
    c.add_argument("--ruleset", default="tensat", help="the language the program is written in")
    c.add_argument("--weights", help="an ONNX model whose initializers hold the weights (default: random)")
    c.add_argument("--seed", type=AT_LEAST_ZERO, default=0, help="seed of the random weights")
    c.add_argument("-o", "--output", required=True, help="the .onnx file to write (a new file)")
    c.add_argument("--force", action="store_true", help="replace --output if it exists")
    c.set_defaults(fn=cmd_export)


def main(argv: list[str] | None = None) -> int:
    from eqdsl import worker
    from eqdsl.worker import Interrupted, stop_signals, stop_signals_interrupt, supervise

    if status.suspend not in worker.BEFORE_FORK:
        worker.BEFORE_FORK.append(status.suspend)
    in_process = os.environ.get("EQDSL_IN_PROCESS") == "1"  # for debuggers and profilers
    outcome: int | Work | None = None
    try:
        with stop_signals_interrupt():
            args = build_parser().parse_args(argv)
            outcome = _reporting(lambda: args.fn(args))
            if isinstance(outcome, int):
                return outcome
            work = outcome
            return supervise(lambda: cast(int, _reporting(work.run)), work.cleanup, in_process)
    except Interrupted:  # before the worker started: what the command prepared is removed
        with stop_signals(signal.SIG_IGN):  # a second Ctrl-C must not cut the clean-up short
            if isinstance(outcome, Work):
                outcome.cleanup()
            remove_prepared()  # a scratch folder made before the command handed it over
            print("interrupted: stopped, nothing written", file=sys.stderr)
        return 130


def _reporting(fn: Callable[[], int | Work]) -> int | Work:
    """`fn()`, with user mistakes rendered on stderr (exit 2) instead of raised."""
    try:
        return fn()
    except EqdslError as err:
        for d in err.diagnostics:
            print(d.render(), file=sys.stderr)  # plain print: rich would re-wrap source lines
        return 2
    except KeyboardInterrupt:  # only reachable in-process (the worker ignores SIGINT)
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as err:  # the machine's, not eqdsl's: a full disk, a busy mount, no permission
        where = f": {err.filename}" if err.filename else ""
        print(f"error: {err.strerror or err}{where} (errno {err.errno}); nothing was published", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
