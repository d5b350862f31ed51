"""`eqdsl synthesize` and `eqdsl derive`: rules from semantics (`eqdsl.synth`)."""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from eqdsl import status
from eqdsl.cli.common import (
    AT_LEAST_ONE,
    AT_LEAST_ZERO,
    NO_REF_HELP,
    POSITIVE,
    TARGET_HELP,
    Work,
    in_worker,
    int_list,
    named_ints,
    published,
    stderr,
    stdout,
    with_target,
)
from eqdsl.diagnostics import EqdslError
from eqdsl.output import FileScratch, check_new_file


def _synthesis_commands(sub) -> None:
    _derive_command(sub)
    _synthesize_command(sub)


def _derive_command(sub) -> None:
    c = sub.add_parser("derive", help="which rules of B the rules of A prove by equality saturation")
    c.add_argument("a", help="the rules that prove (a .eqr path or a shipped ruleset name)")
    c.add_argument("b", help="the rules to prove: those written in this file (not the ones it includes)")
    c.add_argument("--iter-limit", type=AT_LEAST_ONE, default=8, help="iterations per rule (default 8)")
    c.add_argument("--node-limit", type=AT_LEAST_ONE, default=20_000, help="e-nodes per rule (default 20000)")
    c.add_argument("--time-limit", type=POSITIVE, default=10.0, help="seconds per rule (default 10)")
    c.add_argument("--k-multi", type=AT_LEAST_ZERO, default=1,
                   help="iterations with A's multi-pattern rules (default 1, as TENSAT)")
    c.add_argument("--all", action="store_true", help="print every rule's verdict, not only those not derived")
    c.add_argument("--target", help=TARGET_HELP + ", for A's and B's rules")
    c.add_argument("--json", action="store_true", help="print one JSON object (derived, total, every rule's "
                                                       "verdict) instead")
    c.set_defaults(fn=in_worker(cmd_derive))


def _synthesize_command(sub) -> None:
    c = sub.add_parser("synthesize", help="infer a small verified rule set from a language's reference semantics")
    c.add_argument("language", help="a .eqr path or a shipped ruleset name (its operators and semantics)")
    c.add_argument("-o", "--output", required=True, help="the .eqr file to write (a new file)")
    c.add_argument("--ops", type=lambda t: [o for o in t.split(",") if o],
                   help="operators to use, constant operators (scalar, num) too (default: all)")
    c.add_argument("--size", type=AT_LEAST_ONE, help="operators per term, at most (default 2; with --goal, "
                                                     "one more than the goal has)")
    c.add_argument("--vars", type=AT_LEAST_ONE, default=3, help="variables per sort (default 3)")
    c.add_argument("--ints", type=int_list, default=[0, 1, 2], help="Int literals to try (default 0,1,2)")
    c.add_argument("--values", type=named_ints, action="append", default=[], metavar="NAME=V,V",
                   help="the Int literals for parameters of this name instead (--values act=0,2); repeatable")
    c.add_argument("--shape", type=int_list, action="append",
                   help="the shape of every variable of a sort with shapes (default 3,3); give it again for "
                        "one more enumeration at that shape (--shape 3,3 --shape 2,2,3,3)")
    c.add_argument("--examples", type=AT_LEAST_ONE, default=100,
                   help="verify's examples per rule (default 100; a kept rule then 5x that on five other seeds)")
    c.add_argument("--jobs", type=AT_LEAST_ONE, default=min(4, os.cpu_count() or 1),
                   help="processes for the enumerations at each --shape and a kept rule's five confirming seeds "
                        "(default: the CPUs, at most 4); the rules are the same for any number")
    c.add_argument("--time-limit", type=POSITIVE, default=600.0, help="seconds in all (default 600)")
    c.add_argument("--seed", type=AT_LEAST_ZERO, default=0, help="seed of the fingerprint inputs (default 0)")
    c.add_argument("--no-ref", action="store_true", help=NO_REF_HELP)
    c.add_argument("--force", action="store_true", help="replace --output if it exists")
    _kept_flags(c)
    _goal_flags(c)
    c.set_defaults(fn=cmd_synthesize)


def _kept_flags(c) -> None:
    """What a run keeps beyond the rules it finds: an earlier set, and lifts of each rule."""
    c.add_argument("--prior", metavar="FILE", help="an earlier rule set over the same operators (a synthesized "
                                                   "file): its rules count as kept from the start, are written "
                                                   "first, and what they derive is not kept again")
    c.add_argument("--generalize", action="store_true",
                   help="lift a kept rule's literal Int parameters to variables where it holds at every value, "
                        "and a rule at a binary operator to its n-ary forms (concat3..5) "
                        "(each lift verified; --goal always does)")


def _goal_flags(c) -> None:
    c.add_argument("--goal", metavar="PATTERN",
                   help="instead: the cheapest verified equivalent of this pattern under --target, as one rule "
                        "(--goal 'ewadd(batchnorm(?x, ?s, ?b, ?m, ?v), ?g)')")
    c.add_argument("--at", type=named_ints, action="append", default=[], metavar="NAME=d0,d1,...",
                   help="with --goal: the shape of variable ?NAME where the pattern occurs; one per variable")
    c.add_argument("--constant", type=lambda t: {v for v in t.split(",") if v}, default=set(), metavar="A,B",
                   help="with --goal: variables known before the program runs (weights: what only they compute "
                        "costs nothing)")
    c.add_argument("--target", help="with --goal: the target whose cost rules price the forms (a shipped name "
                                    "or a .yaml path; default: the language's params' defaults)")


def cmd_synthesize(args: argparse.Namespace) -> Work:
    """Like `writing`, but a stop keeps the rules verified so far: the worker writes them into
    the scratch file after each kept rule, and the clean-up publishes what is there."""
    if args.goal is not None and args.prior:
        raise EqdslError.one("synthesize: --prior adds to a rule set; --goal writes one rule, without it",
                             path="--prior")
    if args.goal is None and (args.at or args.constant or args.target):
        raise EqdslError.one("synthesize: --at, --constant and --target go with --goal", path="--goal")
    scratch = FileScratch(Path(args.output), args.force, "--output")

    def keep_verified() -> str | None:
        kept = None
        if scratch.file.is_file():
            rules = sum(line.startswith("rule ") for line in scratch.file.read_text().splitlines())
            names = [n for n in (scratch.target.name, scratch.target.stem + "_ref.py")
                     if (scratch.folder / n).is_file()]
            try:
                kept = f"interrupted: kept the {rules} rules verified so far in {scratch.publish(names)}"
            except EqdslError as err:  # a companion's name taken meanwhile: said, not a traceback
                kept = f"interrupted: the {rules} rules verified so far are not kept: {err.diagnostics[0].message}"
        scratch.discard()
        return kept

    def run() -> int:
        # Hypothesis (verify) caches into ./.hypothesis by default: into the worker's private temporary folder
        os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", tempfile.mkdtemp(prefix="eqdsl-hypothesis-"))
        return _synthesize(args, scratch)

    return Work(run, keep_verified, hard_limit_s=HARD_GRACE_S + HARD_SHARE * args.time_limit)


# --time-limit is checked between steps; a step in a user's reference semantics may never return
HARD_GRACE_S, HARD_SHARE = 10.0, 1.5


def _synthesize(args: argparse.Namespace, scratch: FileScratch) -> int:
    import time

    from eqdsl.frontend import load_language
    from eqdsl.output import write_file_atomically
    from eqdsl.schedule.runner import Limits
    from eqdsl.synth.checked import processes_for
    from eqdsl.synth.enumerate import Space
    from eqdsl.synth.synthesize import synthesize
    from eqdsl.synth.written import declarations, rules_text, semantics_companion
    from eqdsl.verify.semantics import load_semantics

    lang = load_language(args.language)
    if args.goal is not None:
        return _synthesize_goal(args, lang, scratch)
    shapes = tuple(tuple(shape) for shape in args.shape or [[3, 3]])
    space = Space(args.size or 2, args.vars, tuple(args.ints), tuple(args.ops or ()), seed=args.seed, shapes=shapes,
                  params=tuple(args.values))
    prior = _prior(args.prior, lang) if args.prior else ()
    files = [scratch.target.name]
    if (companion := semantics_companion(lang)) is not None:  # a user's semantics: found from beside the file
        files.append(scratch.target.stem + "_ref.py")
        check_new_file(scratch.target.parent / files[-1], args.force, f"--output (its file {files[-1]})")
        (scratch.folder / files[-1]).write_text(companion)
    declared = declarations(lang, lang.name)

    def checkpoint(partial) -> None:  # what a stop keeps (`cmd_synthesize`)
        header = "STOPPED before the end: the rules verified so far, written after each kept rule."
        write_file_atomically(scratch.file, rules_text(lang, partial, header, declared))

    status.show(stderr)
    sem = load_semantics(lang, run_ref=not args.no_ref)
    with status.stage("synthesize"), processes_for(lang, sem, args.jobs):
        found = synthesize(lang, sem, space, Limits(8, 20_000, 5), args.examples, time.monotonic() + args.time_limit,
                           lambda note: status.update(note=note), checkpoint, generalize=args.generalize, prior=prior)
    _write_checked(scratch, rules_text(lang, found, _header(args, lang, space, found), declared), lang,
                   str(args.output))
    written = scratch.publish(files)
    also = f" (and {files[1]}, which finds {lang.name}'s semantics)" if len(files) > 1 else ""
    stdout.print(f"wrote {published(written, args.output)}{also}: {_summary(found)}", markup=False)
    return 0


def _summary(found) -> str:
    """What a synthesis kept, in one line."""
    new = len(found.kept) - found.prior
    kept = f"{new} new rule{'s' * (new != 1)} and the {found.prior} of --prior" if found.prior else f"{new} rules"
    guarded = f", {found.guarded} guarded by an analysis" if found.guarded else ""
    return (f"{kept}, {found.merges} of them multi-pattern{guarded} ({found.rejected} candidates failed verify) "
            f"in {found.seconds:.1f} s{'' if found.complete else '; stopped at --time-limit'}")


def _write_checked(scratch: FileScratch, text: str, lang, shown_as: str) -> None:
    """`text` into the scratch file, checked first: never a file that does not check."""
    from eqdsl.frontend import check_modules, load_modules, resolve_ruleset
    from eqdsl.frontend.parse import parse_text
    from eqdsl.output import write_file_atomically

    base = [] if f"include {lang.name}" not in text else load_modules(resolve_ruleset(lang.name))
    check_modules([*base, parse_text(text, shown_as)])
    write_file_atomically(scratch.file, text)


def _header(args: argparse.Namespace, lang, space, found) -> str:
    """Where the file came from: the command that wrote it, what it found, whether it finished."""
    shapes = "".join(" --shape " + ",".join(map(str, s)) for s in space.shapes)
    prior = f" --prior {args.prior}" if args.prior else ""
    return (f"Synthesized by `eqdsl synthesize {args.language} --size {space.size} --vars {args.vars} --ints "
            f"{','.join(map(str, args.ints))}{shapes}{_space_options(args)}{' --generalize' if args.generalize else ''}"
            f"{prior}` from the reference semantics of {lang.name}:\n{found.terms} terms in {found.classes} "
            f"fingerprint classes, {found.candidates} candidate rules; {len(found.kept) - found.prior} kept, each "
            f"passing `eqdsl verify` ({args.examples} examples); {found.rejected} failed `verify`."
            + (f"\nThe first {found.prior} rules are {args.prior}'s, kept as they are." if found.prior else "")
            + (f"\nNo single-pattern rule is derivable from the others{_untried_note(found)}; the last "
               f"{found.merges} are multi-pattern merges lifted from equations over a concat (none an instance of "
               "another)."
               if found.complete else
               "\nSTOPPED at --time-limit: the rules verified so far (each not derivable from those kept before "
               "it; the last pass, which drops a rule the later ones derive, did not finish)."))


def _prior(path: str, lang) -> tuple:
    """`--prior FILE`'s own rules as kept candidates; FILE must be over `lang`'s operators."""
    from eqdsl.frontend import load_language
    from eqdsl.synth.arity import operator_count
    from eqdsl.synth.candidates import prior_candidates
    from eqdsl.synth.derive import own_rules

    earlier = own_rules(load_language(path))
    if set(earlier.ops) != set(lang.ops):
        raise EqdslError.one(f"expected a rule set over the operators of {lang.name}, found {path} over "
                             f"{', '.join(sorted(earlier.ops))}", path="--prior")
    return tuple(prior_candidates(earlier.rules, operator_count, f"from {Path(path).name}"))


def _untried_note(found) -> str:
    """The kept rules derivability was not tried on (`eqdsl.synth.synthesize`)."""
    untried = ([f"the {found.lifted} lifted to n-ary forms"] if found.lifted else []) + \
        ([f"the {found.folds} constant folds by analyses"] if found.folds else []) + \
        ([f"the {found.prior} of --prior"] if found.prior else [])
    return f" (but for {' and '.join(untried)}, which the others are not tried on)" if untried else ""


def _space_options(args: argparse.Namespace) -> str:
    """The options that shaped the enumeration, as the command line gave them (a file's provenance)."""
    values = "".join(f" --values {n}=" + ",".join(map(str, v)) for n, v in args.values)
    return f"{values}{' --ops ' + ','.join(args.ops) if args.ops else ''}"


def _synthesize_goal(args: argparse.Namespace, lang, scratch: FileScratch) -> int:
    import time

    from eqdsl.cost.model import RuleCosts
    from eqdsl.cost.targets import bind_target, load_target
    from eqdsl.output import write_file_atomically
    from eqdsl.synth.checked import processes_for
    from eqdsl.synth.enumerate import Space
    from eqdsl.synth.goals import cheaper_form, read_goal, size_of
    from eqdsl.synth.synthesize import Synthesis
    from eqdsl.synth.written import declarations, rules_text
    from eqdsl.verify.semantics import load_semantics

    goal = read_goal(lang, args.goal, dict(args.at), args.constant)
    costs = RuleCosts(lang, bind_target(lang, load_target(args.target) if args.target else None, "--target"))
    size = args.size or 1 + size_of(goal.pattern)
    space = Space(size, ints=tuple(args.ints), ops=tuple(args.ops or ()), seed=args.seed, params=tuple(args.values))
    status.show(stderr)
    sem = load_semantics(lang, run_ref=not args.no_ref)
    with status.stage("synthesize"), processes_for(lang, sem, args.jobs):
        deadline = time.monotonic() + args.time_limit  # ends the enumeration; what it found is still verified
        form = cheaper_form(lang, sem, goal, costs, space, args.examples, stop=lambda: time.monotonic() > deadline)
    if form is None:
        stopped = " (the enumeration stopped at --time-limit)" if time.monotonic() > deadline else ""
        stdout.print(f"no cheaper equivalent of {args.goal} within {size} operators passed verify{stopped}; "
                     "nothing written", markup=False)
        return 1
    shapes = " ".join(f"--at {v}={','.join(map(str, s))}" for v, s in goal.shapes)
    constant = f" --constant {','.join(sorted(args.constant))}" if args.constant else ""
    header = (f"Synthesized by `eqdsl synthesize {args.language} --goal '{args.goal}' {shapes}{constant} --size {size}"
              f"{_space_options(args)}{' --target ' + args.target if args.target else ''}`: the cheapest verified "
              "equivalent "
              f"({form.goal_cost:,.0f} -> {form.cost:,.0f} at those shapes; {form.tried} tried).")
    write_file_atomically(scratch.file, rules_text(lang, Synthesis(kept=[form.candidate]), header,
                                                   declarations(lang, lang.name)))
    written = scratch.publish([scratch.target.name])
    stdout.print(f"wrote {published(written, args.output)}: {form.candidate.text} "
                 f"(cost {form.goal_cost:,.0f} -> {form.cost:,.0f})", markup=False)
    return 0


def cmd_derive(args: argparse.Namespace) -> int:
    from eqdsl.frontend import load_language
    from eqdsl.schedule.runner import Limits
    from eqdsl.synth.derive import Verdict, derive, own_rules

    a, b = (with_target(load_language(path), args.target) for path in (args.a, args.b))
    limits = Limits(args.iter_limit, args.node_limit, args.time_limit)

    def progress(done: int, total: int, d) -> None:
        status.update(step=f"{done}/{total}", note=d.rule)
        if not args.json and (args.all or d.verdict is not Verdict.DERIVED):
            why = f" ({d.why})" if d.why else ""
            stdout.print(f"{d.verdict.value:16} {d.rule}{why}", markup=False)

    if not args.json:
        status.show(stderr)
        if a.name != b.name:
            stdout.print(f"note: A is language {a.name}, B language {b.name}: B's rules are instantiated with A's "
                         "operators and sorts of the same names", markup=False)
    with status.stage("derive"):
        found = derive(a, own_rules(b), limits, args.k_multi, progress)
    if not found and not args.json:
        stdout.print(f"{args.b} has no rules of its own (the rules of files it includes are not counted)",
                     markup=False)
    derived = sum(d.verdict is Verdict.DERIVED for d in found)
    if args.json:
        print(json.dumps({"derived": derived, "total": len(found), "rules": [
            {"name": d.rule, "verdict": d.verdict.value, **({"why": d.why} if d.why else {})} for d in found]}))
        return 0
    share = 100.0 * derived / len(found) if found else 0.0
    stdout.print(f"derived {derived} of {len(found)} rules ({share:.1f} %)", markup=False)
    return 0

