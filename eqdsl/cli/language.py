"""`eqdsl check`, `verify`, `compile`: a language and its rules."""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
from pathlib import Path

from eqdsl.cli.common import (
    AT_LEAST_ONE,
    AT_LEAST_ZERO,
    NO_REF_HELP,
    POSITIVE,
    TARGET_HELP,
    in_worker,
    stdout,
    with_target,
)
from eqdsl.diagnostics import EqdslError


def cmd_check(args: argparse.Namespace) -> int:
    from eqdsl.frontend.check.lints import guard_warnings

    try:
        lang = _checked(args.file)
    except EqdslError as err:
        if not args.json:
            raise
        print(json.dumps({"ok": False, "diagnostics": [_diagnostic_json(d) for d in err.diagnostics]}))
        return 2
    warnings = guard_warnings(lang)
    if args.json:
        print(json.dumps({"ok": True, "language": lang.name, "sorts": len(lang.sorts), "operators": len(lang.ops),
                          "rules": [{"name": r.name, "multi": r.is_multi, "at": str(r.span)} for r in lang.rules],
                          "diagnostics": [_diagnostic_json(w) for w in warnings]}))
        return 0
    for warning in warnings:
        print(warning.render(), file=sys.stderr)
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


def _checked(file: str):
    """The language, its egglog blocks run by egglog and its rules probed for shape changes."""
    from eqdsl.diagnostics import Diagnostic
    from eqdsl.egglog.blocks import egglog_block_errors
    from eqdsl.frontend import load_language
    from eqdsl.verify.shape_probe import shape_changing_rules

    lang = load_language(file)
    blocks = egglog_block_errors(lang)
    if blocks:
        raise EqdslError(blocks)
    unsound = shape_changing_rules(lang)
    if unsound:
        raise EqdslError([Diagnostic(f"rule {rule.name} unions terms of different shapes: {example}; "
                                     "expected both sides to have the same shape", rule.span)
                          for rule, example in unsound])
    return lang


def _diagnostic_json(d) -> dict:
    where = {"file": d.span.file, "line": d.span.line, "col": d.span.col} if d.span else {"path": d.path}
    return {"level": d.level, "message": d.message, **where}


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

    from eqdsl.frontend import load_language
    from eqdsl.verify.analysis_checks import check_analyses
    from eqdsl.verify.parallel import verified
    from eqdsl.verify.rules import Status, operator_rules
    from eqdsl.verify.semantics import load_semantics

    lang = with_target(load_language(args.file), args.target)
    sem = load_semantics(lang, run_ref=not args.no_ref)
    rules = operator_rules(lang, sem) + list(lang.rules)
    # first: the guards over them rely on them
    checks = check_analyses(lang, sem, args.examples, args.seed, only=args.rule or None, limit_s=args.time_limit)
    if args.rule:
        rules = [r for r in rules if r.name in args.rule]
        missing = sorted(set(args.rule) - {r.name for r in [*rules, *checks]})
        if missing:
            raise EqdslError.one(f"no rule named {', '.join(missing)} in {args.file}")
    failed, results = 0, []
    rest = verified(lang, sem, rules, args.examples, args.seed, args.time_limit, args.jobs)
    for res in itertools.chain(checks, rest):
        results.append(res)
        if res.status is not Status.PASSED:
            failed += 1
        if not args.json:
            _print_verdict(args, res)
    if args.json:
        print(json.dumps({"passed": len(results) - failed, "total": len(results), "seed": args.seed,
                          "not_verified": [f"{span.file}:{span.line}" for _, span in lang.egglog],
                          "rules": [_verdict_json(r) for r in results]}))
        return 1 if failed else 0
    also = " and analysis checks analysis:*" if checks else ""
    stdout.print(f"{len(results) - failed}/{len(results)} rules (operator checks op:*{also} included) passed, "
                 f"seed {args.seed}", markup=False)
    for _, span in lang.egglog:
        stdout.print(f"not verified: the egglog block at {span.file}:{span.line} (verify sees .eqr rules only; "
                     "its rewrites are the author's to prove)", markup=False)
    return 1 if failed else 0


def _verdict_json(res) -> dict:
    c = res.counterexample
    example = None if c is None else {"message": c.message, "max_error": c.max_error,
                                      "sizes": {v: list(s) for v, s in c.sizes.items()},
                                      "values": {k: v if isinstance(v, (int, float, str)) else str(v)
                                                 for k, v in c.values.items()}}
    return {"name": res.name, "status": res.status.value, "examples": res.examples,
            "seconds": round(res.seconds, 3), "counterexample": example, **({"note": res.note} if res.note else {})}


def _print_verdict(args: argparse.Namespace, res) -> None:
    """One rule's verdict, and its counterexample with the line that reproduces it."""
    import math

    import numpy as np

    from eqdsl.verify.rules import Status

    stdout.print(f"{res.status.value:7} {res.name:24} {res.examples:5} examples  {res.seconds:6.2f} s", markup=False)
    c = res.counterexample
    if c is not None:
        sizes = ", ".join(f"?{v}: {list(s)}" for v, s in sorted(c.sizes.items()))
        values = ", ".join(f"{k} = {v}" for k, v in sorted(c.values.items()))
        error = "" if math.isnan(c.max_error) else f"; max error {c.max_error:.3g}"
        details = "; ".join([*([f"shapes {sizes}"] if sizes else []), *([f"values {values}"] if values else [])])
        stdout.print(f"        {c.message}{error}" + (f"\n        {details}" if details else ""), markup=False)
        for name, value in sorted(c.inputs.items()):
            shown = np.array2string(np.asarray(value), threshold=64, precision=6, separator=", ")
            stdout.print(f"        ?{name} = " + shown.replace("\n", "\n          "), markup=False)
        stdout.print(f"        reproduce: eqdsl verify {args.file} --rule {res.name} --seed {args.seed} "
                     f"--examples {args.examples}", markup=False)
    elif res.status is Status.VACUOUS:
        stdout.print(f"        no valid example could be drawn: {res.note or 'the rule never applies'}", markup=False)
    elif res.status is Status.TIMED_OUT:
        stdout.print(f"        {res.note}", markup=False)


def cmd_compile(args: argparse.Namespace) -> int:
    from eqdsl.egglog.lower import load_program, lower_language
    from eqdsl.frontend import load_language

    lang = with_target(load_language(args.file), args.target)
    lowered = lower_language(lang)
    sys.stdout.write(lowered.text)
    for program in lang.programs.values():
        sys.stdout.write(f";; ---- program {program.name} ----\n" + load_program(program, lowered))
    return 0


def cmd_fmt(args: argparse.Namespace) -> int:
    from eqdsl.frontend.fmt import format_text

    path = Path(args.file)
    if path.exists() and not path.is_file():  # a device reads as an empty, well-formed file
        raise EqdslError.one(f"cannot read {path}: not a regular file (a directory or a device); expected a .eqr file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise EqdslError.one(f"cannot read {path}: {err}; expected a .eqr file") from None
    formatted = format_text(text, str(path))
    if args.check:
        if formatted != text:
            print(f"{path}: not formatted (`eqdsl fmt --write {path}` formats it)", file=sys.stderr)
        return 0 if formatted == text else 1
    if not args.write:
        sys.stdout.write(formatted)
    elif formatted != text:
        _replace_formatted(path, text, formatted)
        print(f"formatted {path}", file=sys.stderr)
    return 0


def _replace_formatted(path: Path, text: str, formatted: str) -> None:
    """The file the user named replaced whole or not at all: through a link its target (the link
    stays), with its mode, and not if it changed since it was read (an editor saved meanwhile)."""
    from eqdsl.output import replace_atomically

    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError) as err:
        raise EqdslError.one(f"cannot resolve {path}: {err}; expected a .eqr file") from None
    mode = target.stat().st_mode & 0o7777

    def write(tmp: Path) -> None:
        tmp.write_text(formatted)
        if target.read_text() != text:
            raise EqdslError.one(f"{path} changed while it was formatted; left as it is now (run fmt again)")

    replace_atomically(target, write, mode)


def _language_commands(sub) -> None:
    c = sub.add_parser("check", help="check a .eqr file; print every error")
    c.add_argument("file", help="a .eqr path or a shipped ruleset name")
    c.add_argument("--rules", action="store_true", help="list every rule: name, single- or multi-pattern, where")
    c.add_argument("--json", action="store_true", help="print one JSON object (ok, rules, diagnostics) instead")
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
    c.add_argument("--time-limit", type=POSITIVE, default=120.0,
                   help="seconds per rule (default 120): a rule still being checked then is TIMEOUT, not passed")
    c.add_argument("--jobs", type=AT_LEAST_ONE, default=min(4, os.cpu_count() or 1),
                   help="rules checked at once, each in its own process (default: the CPUs, at most 4); the "
                        "results are the same for any number")
    c.add_argument("--target", help=TARGET_HELP)
    c.add_argument("--no-ref", action="store_true", help=NO_REF_HELP)
    c.add_argument("--json", action="store_true", help="print one JSON object (passed, total, rules with "
                                                       "counterexamples) instead")
    c.set_defaults(fn=in_worker(cmd_verify))
    c = sub.add_parser("fmt", help="print a .eqr file in one canonical layout (comments kept)")
    c.add_argument("file", help="a .eqr file")
    c.add_argument("--write", action="store_true", help="replace the file with its formatted text (atomically)")
    c.add_argument("--check", action="store_true", help="print nothing; exit 1 if the file is not formatted")
    c.set_defaults(fn=in_worker(cmd_fmt))

