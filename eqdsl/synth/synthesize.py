"""`eqdsl synthesize LANGUAGE`: a small verified rule set inferred from the reference semantics.

Contract: `synthesize(lang, sem, space, limits)` enumerates and fingerprints terms
(`eqdsl.synth.enumerate`), turns each pair of terms with one fingerprint into a candidate rule
(the larger term on the left; the right side's variables among the left's; variables renamed in
order of appearance, so a law is one candidate however its variables are named), orders the
candidates cheapest first (fewest operators in all, then text), and keeps a small set, as Ruler
minimizes: each round drops every candidate the kept rules already derive (`eqdsl.synth.derive`,
under `limits`), then takes the cheapest one left, verifies it (`eqdsl.verify.rules.verify_rule`,
`examples` examples) and keeps it if it passes. A last pass drops a kept rule the others derive.
Every kept rule passed `verify`; its name is stable (`syn-` and a hash of its text) and it
records where it came from (size, fingerprint class). `deadline` (`time.monotonic()`) ends the
search early with what was verified so far (`Synthesis.complete` False).
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, cast

from eqdsl import ir
from eqdsl.diagnostics import NO_SPAN
from eqdsl.ir.text import pattern_text
from eqdsl.schedule.runner import Limits
from eqdsl.synth.derive import Prover, Verdict
from eqdsl.synth.enumerate import VARIABLE_NAMES, Enumeration, Space, Term, candidates, enumerate_terms
from eqdsl.verify.rules import Status, verify_rule


@dataclass(frozen=True)
class Candidate:
    rule: ir.Rule
    size: int  # operators on both sides
    fingerprint_class: int  # the index of the class's first term in the enumeration

    @property
    def text(self) -> str:
        return rule_text(self.rule)


def rule_text(rule: ir.Rule) -> str:
    """A single-pattern rule as `.eqr` text after `rule NAME:` (its `where`s and `if`s being the
    list values `_lifted` made)."""
    text = f"{pattern_text(rule.lhs[0])} => {pattern_text(rule.rhs[0])}"
    wheres = [f"{name} = {_list_text(value)}" for name, value in rule.wheres]
    conds = [f"?{c.expr.left.name[1:]} == {_list_text(c.expr.right)}" for c in rule.conds  # type: ignore[union-attr]
             if isinstance(c, ir.ExprCond)]
    return text + (" where " + ", ".join(wheres) if wheres else "") + (" if " + ", ".join(conds) if conds else "")


def _list_text(e: ir.Expr) -> str:
    assert isinstance(e, ir.ListOf)
    return "[" + ", ".join(str(cast(ir.Const, i).value) for i in e.items) + "]"


@dataclass
class Synthesis:
    terms: int = 0
    classes: int = 0
    candidates: int = 0
    kept: list[Candidate] = field(default_factory=list)
    rejected: int = 0  # candidates `verify` failed
    complete: bool = True
    seconds: float = 0.0


def synthesize(lang: ir.Language, sem: dict[str, Any], space: Space, limits: Limits, examples: int = 100,
               deadline: float | None = None, progress: Callable[[str], None] = lambda note: None,
               kept_one: Callable[[Synthesis], None] = lambda partial: None) -> Synthesis:
    """See the module docstring; `kept_one(partial)` after each rule kept (a checkpoint)."""
    t0 = time.perf_counter()
    out_of_time = (lambda: False) if deadline is None else (lambda: time.monotonic() > deadline)
    found = enumerate_terms(lang, sem, space, out_of_time)
    pool = rule_candidates(found)
    result = Synthesis(len(found.terms), len(found.classes), len(pool))
    progress(f"{len(found.terms)} terms, {len(found.classes)} classes, {len(pool)} candidates")
    result.complete = _minimize(lang, sem, pool, limits, examples, result, out_of_time, progress, kept_one)
    if result.complete:
        result.kept = _without_derivable(lang, result.kept, limits)
    result.seconds = time.perf_counter() - t0
    return result


def rule_candidates(found: Enumeration) -> list[Candidate]:
    seen: dict[str, Candidate] = {}
    for term, representative in candidates(found):
        rule = _oriented(term, representative)
        if rule is None:
            continue
        candidate = Candidate(rule, term.size + representative.size, found.classes[term.fingerprint])
        seen.setdefault(candidate.text, candidate)
    return sorted(seen.values(), key=lambda c: (c.size, c.text))


def _oriented(term: Term, representative: Term) -> ir.Rule | None:
    """`term => representative`, or the other way where only that keeps the right side's
    variables among the left's; None where neither does or the left would be a bare variable."""
    for left, right in ((term.pattern, representative.pattern), (representative.pattern, term.pattern)):
        if isinstance(left, ir.PApp) and _variables(right) <= _variables(left):
            rule = _lifted(*_renamed((left, right)))
            return replace(rule, name="syn-" + hashlib.sha1(rule_text(rule).encode()).hexdigest()[:8])
    return None


def _lifted(lhs: ir.Pattern, rhs: ir.Pattern) -> ir.Rule:
    """The rule `lhs => rhs` with its list literals (a transpose's `[1, 0]`), which `.eqr`
    patterns cannot hold, lifted out: on the left each is a variable `?pN` with the condition
    `?pN == [1, 0]`, on the right the left's variable of that value, or a `where qN = [1, 0]`."""
    conds: list[ir.Cond] = []
    on_left: dict[tuple, str] = {}

    def left(p: ir.Pattern) -> ir.Pattern:
        match p:
            case ir.PLit(value=tuple() as value):
                name = f"p{len(conds)}"
                same = ir.BinOp("eq", ir.Ref("?" + name, ir.Prim.INTS), _list_of(value), ir.Prim.BOOL)
                conds.append(ir.ExprCond(same))
                on_left.setdefault(value, name)
                return ir.PVar(name, ir.Prim.INTS)
            case ir.PApp(op=op, args=args):
                return ir.PApp(op, tuple(left(a) for a in args), NO_SPAN)
            case _:
                return p

    wheres: list[tuple[str, ir.Expr]] = []

    def right(p: ir.Pattern) -> ir.Pattern:
        match p:
            case ir.PLit(value=tuple() as listed):
                if listed in on_left:
                    return ir.PVar(on_left[listed], ir.Prim.INTS)
                wheres.append((f"q{len(wheres)}", _list_of(listed)))
                return ir.PBound(wheres[-1][0], ir.Prim.INTS)
            case ir.PApp(op=op, args=args):
                return ir.PApp(op, tuple(right(a) for a in args), NO_SPAN)
            case _:
                return p

    new_lhs = left(lhs)
    return ir.Rule("", (cast(ir.PApp, new_lhs),), (right(rhs),), tuple(wheres), tuple(conds), NO_SPAN)


def _list_of(value: tuple) -> ir.ListOf:
    return ir.ListOf(tuple(ir.Const(v, ir.Prim.INT) for v in value))


def _variables(p: ir.Pattern) -> set[str]:
    match p:
        case ir.PVar(name=name):
            return {name}
        case ir.PApp(args=args):
            return set().union(*(_variables(a) for a in args)) if args else set()
        case _:
            return set()


def _renamed(sides: tuple[ir.Pattern, ...]) -> tuple[ir.Pattern, ...]:
    """Variables renamed a, b, c in order of first appearance (left side first)."""
    names: dict[str, str] = {}

    def rename(p: ir.Pattern) -> ir.Pattern:
        match p:
            case ir.PVar(name=name, type=t):
                return ir.PVar(names.setdefault(name, VARIABLE_NAMES[len(names)]), t)
            case ir.PApp(op=op, args=args):
                return ir.PApp(op, tuple(rename(a) for a in args), NO_SPAN)
            case _:
                return p

    return tuple(rename(s) for s in sides)


def _minimize(lang: ir.Language, sem: dict[str, Any], pool: list[Candidate], limits: Limits, examples: int,
              result: Synthesis, out_of_time: Callable[[], bool], progress: Callable[[str], None],
              kept_one: Callable[[Synthesis], None]) -> bool:
    """Cheapest first: a candidate the kept rules derive is dropped, else verified and kept if it
    passes (the prover is rebuilt only when a rule is kept)."""
    prover: Prover | None = None
    for k, candidate in enumerate(pool):
        if out_of_time():
            return False
        if result.kept:
            prover = prover or Prover(_with_rules(lang, result.kept), limits)
            if prover.prove(lang, candidate.rule).verdict is Verdict.DERIVED:
                continue
        if verify_rule(lang, sem, candidate.rule, examples, seed=0).status is Status.PASSED:
            result.kept.append(candidate)
            prover = None
            kept_one(result)
        else:
            result.rejected += 1
        progress(f"{len(result.kept)} rules kept, {result.rejected} rejected, {len(pool) - k - 1} candidates left")
    return True


def _with_rules(lang: ir.Language, kept: list[Candidate]) -> ir.Language:
    return replace(lang, rules=tuple(c.rule for c in kept))


def _without_derivable(lang: ir.Language, kept: list[Candidate], limits: Limits) -> list[Candidate]:
    """Ruler's last pass: from the dearest down, drop a rule the others derive."""
    rules = list(kept)
    for candidate in reversed(kept):
        others = [c for c in rules if c is not candidate]
        if others and Prover(_with_rules(lang, others), limits).prove(lang, candidate.rule).verdict is Verdict.DERIVED:
            rules = others
    return rules


def rules_text(lang: ir.Language, synthesis: Synthesis, header: str, declarations: str) -> str:
    """The kept rules as a `.eqr` file: `declarations` (the language without its rules), then one
    rule per line with where it came from."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += [declarations.rstrip(), ""]
    for c in synthesis.kept:
        lines.append(f"rule {c.rule.name}: {c.text}  # size {c.size}, fingerprint class {c.fingerprint_class}")
    return "\n".join(lines) + "\n"


def declarations(lang: ir.Language, name: str) -> str:
    """A `.eqr` language `name` with `lang`'s sorts, operators, shape and cost rules but none of
    its rules: `include` of it where it has none, else its files' text with every `rule` (and
    `language`, `include`, `program`) left out, in include order. Named as `lang` itself, the
    file finds `lang`'s shipped reference semantics (`verify.semantics.load_semantics`)."""
    from eqdsl.frontend import ast, load_modules

    files = [file for _, file in lang.lineage]
    if not any(r.span.file in files for r in lang.rules):
        return f"language {name}\ninclude {_include_ref(files[-1])}\n"
    text = [f"language {name}"]
    skipped = (ast.LanguageDecl, ast.IncludeDecl, ast.RuleDecl, ast.ProgramDecl)
    for module in load_modules(Path(files[-1])):
        source = Path(module.file).read_text().splitlines()
        drop = {line for item in module.items if isinstance(item, skipped)
                for line in range(item.span.line, max(item.span.line, item.span.end_line) + 1)}
        text += [f"# from {module.file}"] + [line for k, line in enumerate(source, 1) if k not in drop]
    return "\n".join(text) + "\n"


def _include_ref(file: str) -> str:
    from eqdsl.frontend.load import shipped_rulesets

    stem = Path(file).stem
    return stem if stem in shipped_rulesets() and Path(file).parent.name == "rulesets" else f'"{file}"'


def semantics_companion(lang: ir.Language) -> str | None:
    """The `_ref.py` a synthesized file needs beside it when `lang`'s reference semantics are not
    shipped with eqdsl (a user's `_ref.py`): it loads `lang`'s own, from where they are now."""
    import importlib.util

    name = lang.name.replace("-", "_")
    try:
        if importlib.util.find_spec(f"eqdsl.languages.{name}.semantics") is not None:
            return None
    except ModuleNotFoundError:
        pass
    source = lang.lineage[-1][1]
    return (f'"""Reference semantics of {lang.name}: those of {source} (written by `eqdsl synthesize`)."""\n'
            "from eqdsl.frontend import load_language\n"
            "from eqdsl.verify.semantics import load_semantics\n\n"
            f"SEMANTICS = load_semantics(load_language({source!r}))\n")
