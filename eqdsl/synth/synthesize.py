"""`eqdsl synthesize LANGUAGE`: a small verified rule set inferred from the reference semantics.

Contract: `synthesize(lang, sem, space, limits)` enumerates and fingerprints terms
(`eqdsl.synth.enumerate`, once per shape instance), turns each pair of terms with one fingerprint
into a candidate rule (the larger term on the left; the right side's variables among the left's;
variables renamed in order of appearance, so a law is one candidate however its variables are
named), orders the candidates cheapest first (fewest operators in all; then the most distinct
variables, so that a law comes before its instances `f(?a, ?a)`; then text), and keeps a small
set, as Ruler minimizes: each candidate the kept rules already derive (`eqdsl.synth.derive`, at two instances, under
`limits`) is dropped, else it is screened at sizes where no dimensions coincide
(`verify.rules.refuted`: laws of square matrices fall here), verified
(`eqdsl.verify.rules.verify_rule`, `examples` examples) and kept if it passes. A last pass drops a
kept rule the others derive.
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
from eqdsl.verify.examples import DISTINCT_HINTS
from eqdsl.verify.rules import Status, refuted, verify_rule

BATCH = 64  # candidates whose derivability is tried in one e-graph before one by one
# A candidate counts as derived where it is at two instances: one instance's sizes may meet the
# conditions of kept rules (shape(?a)[1] == shape(?b)[1]) by chance, and the law be dropped for it
INSTANCES = (DISTINCT_HINTS, (3, 5, 2, 6, 4))


@dataclass(frozen=True)
class Candidate:
    rule: ir.Rule
    size: int  # operators on both sides
    fingerprint_class: int  # the index of the class's first term in the enumeration
    shape: tuple[int, ...] | None = None  # the variables' shape in that enumeration (shaped sorts)

    @property
    def origin(self) -> str:
        at = f" at shape {list(self.shape)}" if self.shape is not None else ""
        return f"size {self.size}, fingerprint class {self.fingerprint_class}{at}"

    @property
    def both_ways(self) -> bool:
        """An equation between two applications over the same variables, without conditions:
        written `<=>` and applied both ways (Ruler's rules are equations), unless the right side
        matches inside the left (`relu(?a) => relu(relu(?a))` would grow without end)."""
        lhs, rhs = self.rule.lhs[0], self.rule.rhs[0]
        return not self.rule.wheres and all(_shapes_alike(c) for c in self.rule.conds) and \
            isinstance(rhs, ir.PApp) and _variables(rhs) == _variables(lhs) and \
            not any(_matches(rhs, sub, {}) for sub in _subterms(lhs))

    @property
    def rules(self) -> tuple[ir.Rule, ...]:
        """The rewrites it stands for: its rule, and the rule reversed (named as `<=>` names it)."""
        if not self.both_ways:
            return (self.rule,)
        back = replace(self.rule, name=self.rule.name + "-rev", lhs=cast(tuple[ir.PApp, ...], self.rule.rhs),
                       rhs=self.rule.lhs)
        return (self.rule, back)

    @property
    def text(self) -> str:
        return rule_text(self.rule, "<=>" if self.both_ways else "=>")

    def lines(self) -> list[str]:
        """Its `.eqr` lines: one, or two `=>` rules where an equation has conditions (which
        `<=>` cannot carry)."""
        if not (self.both_ways and self.rule.conds):
            return [f"rule {self.rule.name}: {self.text}  # {self.origin}"]
        return [f"rule {r.name}: {rule_text(r)}  # {self.origin}" for r in self.rules]


def _shapes_alike(c: ir.Cond) -> bool:
    return isinstance(c, ir.ExprCond) and isinstance(c.expr, ir.BinOp) and \
        isinstance(c.expr.left, (ir.ShapeOf, ir.IndexOf))


def shapes_alike(lang: ir.Language, candidate: Candidate) -> Candidate | None:
    """The candidate with its shaped variables of one sort required to have one shape (all the
    fingerprints saw: every variable had the enumeration's shape), as TASO writes
    `if shape(?t10) == shape(?t11)`; None where it has fewer than two such variables or has
    conditions already."""
    typed = _typed_variables(candidate.rule.lhs[0], {})
    conds: list[ir.Cond] = []
    for sort in dict.fromkeys(typed.values()):
        shape_type = lang.sorts[sort].shape_type
        alike = [v for v, s in typed.items() if s == sort]
        if shape_type is None:
            continue
        conds += [ir.ExprCond(ir.BinOp("eq", ir.ShapeOf(a, shape_type), ir.ShapeOf(b, shape_type), ir.Prim.BOOL))
                  for a, b in zip(alike, alike[1:])]
    if not conds or candidate.rule.conds:
        return None
    rule = replace(candidate.rule, conds=tuple(conds))
    return replace(candidate, rule=replace(rule, name=_stable_name(rule)))


def _typed_variables(p: ir.Pattern, out: dict[str, str]) -> dict[str, str]:
    """Term variables → their sorts, in order of first appearance."""
    match p:
        case ir.PVar(name=name, type=ir.SortType(name=sort)):
            out.setdefault(name, sort)
        case ir.PApp(args=args):
            for a in args:
                _typed_variables(a, out)
    return out


def rule_text(rule: ir.Rule, arrow: str = "=>") -> str:
    """A single-pattern rule as `.eqr` text after `rule NAME:` (its `where`s and `if`s being the
    list values `_lifted` made)."""
    text = f"{pattern_text(rule.lhs[0])} {arrow} {pattern_text(rule.rhs[0])}"
    wheres = [f"{name} = {_list_text(value)}" for name, value in rule.wheres]
    conds = [_cond_text(c.expr) for c in rule.conds if isinstance(c, ir.ExprCond)]
    return text + (" where " + ", ".join(wheres) if wheres else "") + (" if " + ", ".join(conds) if conds else "")


def _cond_text(e: ir.Expr) -> str:
    """The two conditions synthesis writes: a lifted list value, and shapes alike."""
    match e:
        case ir.BinOp(op="eq", left=ir.Ref(name=name), right=listed):
            return f"?{name[1:]} == {_list_text(listed)}"
        case ir.BinOp(op="eq", left=ir.ShapeOf(var=a), right=ir.ShapeOf(var=b)):
            return f"shape(?{a}) == shape(?{b})"
        case ir.BinOp(op="eq", left=ir.IndexOf(base=ir.ShapeOf(var=a), index=ir.Const(value=i)),
                      right=ir.IndexOf(base=ir.ShapeOf(var=b))):
            return f"shape(?{a})[{i}] == shape(?{b})[{i}]"
    raise AssertionError(e)


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
    pool: dict[str, Candidate] = {}
    result = Synthesis()
    for shape in space.shapes:
        found = enumerate_terms(lang, sem, space, shape, out_of_time)
        for candidate in rule_candidates(found, shape if _shaped(lang) else None):
            pool.setdefault(candidate.text, candidate)
        result.terms, result.classes = result.terms + len(found.terms), result.classes + len(found.classes)
    ordered = sorted(pool.values(), key=_cheapest_first)
    result.candidates = len(ordered)
    progress(f"{result.terms} terms, {result.classes} classes, {len(ordered)} candidates")
    result.complete = _minimize(lang, sem, ordered, limits, examples, result, out_of_time, progress, kept_one)
    if result.complete:
        result.kept, result.complete = _without_derivable(lang, result.kept, limits, out_of_time)
    result.seconds = time.perf_counter() - t0
    return result


def _shaped(lang: ir.Language) -> bool:
    return any(s.shape_type is not None for s in lang.sorts.values())


def rule_candidates(found: Enumeration, shape: tuple[int, ...] | None = None) -> list[Candidate]:
    seen: dict[str, Candidate] = {}
    for term, representative in candidates(found):
        rule = _oriented(term, representative)
        if rule is None:
            continue
        candidate = Candidate(rule, term.size + representative.size, found.classes[term.fingerprint], shape)
        seen.setdefault(candidate.text, candidate)
    return sorted(seen.values(), key=_cheapest_first)


def _cheapest_first(c: Candidate) -> tuple:
    return (c.size, -len(_variables(c.rule.lhs[0])), c.text)


def _oriented(term: Term, representative: Term) -> ir.Rule | None:
    """`term => representative`, or the other way where only that keeps the right side's
    variables among the left's; None where neither does or the left would be a bare variable."""
    for left, right in ((term.pattern, representative.pattern), (representative.pattern, term.pattern)):
        if isinstance(left, ir.PApp) and _variables(right) <= _variables(left):
            rule = _lifted(*_renamed((left, right)))
            return replace(rule, name=_stable_name(rule))
    return None


def _stable_name(rule: ir.Rule) -> str:
    return "syn-" + hashlib.sha1(rule_text(rule).encode()).hexdigest()[:8]


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


def _subterms(p: ir.Pattern) -> list[ir.Pattern]:
    """The proper subterms of `p` that are applications."""
    if not isinstance(p, ir.PApp):
        return []
    return [q for a in p.args for q in ([a] if isinstance(a, ir.PApp) else []) + _subterms(a)]


def _matches(pattern: ir.Pattern, term: ir.Pattern, bound: dict[str, ir.Pattern]) -> bool:
    """Whether `pattern` matches `term`, whose own variables stand for themselves."""
    match pattern:
        case ir.PVar(name=name):
            return bound.setdefault(name, term) == term
        case ir.PApp(op=op, args=args):
            return isinstance(term, ir.PApp) and term.op == op and len(term.args) == len(args) and \
                all(_matches(a, b, bound) for a, b in zip(args, term.args))
        case _:
            return pattern == term


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
    """Cheapest first: a candidate the kept rules derive is dropped, else screened, verified and
    kept if it passes (and added to the prover's e-graph)."""
    prover = Prover(_with_rules(lang, []), limits)
    for start in range(0, len(pool), BATCH):
        batch = pool[start:start + BATCH]
        derived = _derived_together(prover, lang, batch) if result.kept else [False] * len(batch)
        for k, (candidate, dropped) in enumerate(zip(batch, derived)):
            if out_of_time():
                return False
            if dropped or (result.kept and all(prover.prove(lang, candidate.rule, hints).verdict is Verdict.DERIVED
                                               for hints in INSTANCES)):
                continue
            passed = _verified(lang, sem, candidate, examples)
            if passed is None:
                result.rejected += 1
            else:
                result.kept.append(passed)
                for rule in passed.rules:
                    prover.add(rule)
                kept_one(result)
            left = len(pool) - start - k - 1
            progress(f"{len(result.kept)} rules kept, {result.rejected} rejected, {left} candidates left")
    return True


def _derived_together(prover: Prover, lang: ir.Language, batch: list[Candidate]) -> list[bool]:
    """Which of `batch` the prover derives at each of `INSTANCES`."""
    derived = [True] * len(batch)
    for hints in INSTANCES:
        maybe = [k for k, d in enumerate(derived) if d]
        found = prover.derived_together(lang, [batch[k].rule for k in maybe], hints)
        for k, d in zip(maybe, found):
            derived[k] = d
    return derived


def _verified(lang: ir.Language, sem: dict[str, Any], candidate: Candidate, examples: int) -> Candidate | None:
    """The candidate if it passes the screen and `verify` (and again with 5x the examples on
    another seed); else, where it has shaped variables,
    the candidate with their shapes alike, each condition then dropped that it passes without
    (`shape(?b) == shape(?c)`, not every variable's) or else cut to the axes it needs
    (`shape(?a)[1] == shape(?b)[1]`); else None."""
    def passes(c: Candidate, times: int = 1, seed: int = 0) -> bool:
        return not refuted(lang, sem, c.rule) and verify_rule(lang, sem, c.rule, examples * times, seed=seed,
                                                              shrink=False).status is Status.PASSED

    if passes(candidate) and passes(candidate, 5, seed=1):  # 100 examples missed a grouped conv's case once
        return candidate
    alike = shapes_alike(lang, candidate)
    if alike is None or not passes(alike):
        return None
    steps = [alike]
    for cond in alike.rule.conds:
        weaker = _without_cond(steps[-1], cond)
        if passes(weaker):
            steps.append(weaker)
            continue
        per_dimension = _dimension_by_dimension(steps[-1], cond)
        if per_dimension is not None and passes(per_dimension[0]):
            steps.append(per_dimension[0])
            for dim in per_dimension[1]:
                if passes(weaker := _without_cond(steps[-1], dim)):
                    steps.append(weaker)
    # each step looked for the weakest condition that passes: where one passed only because the
    # examples missed a case, 5x the examples on another seed should find it; then a stronger step
    return next((step for step in reversed(steps) if passes(step, 5, seed=1)), None)


def _dimension_by_dimension(c: Candidate, cond: ir.Cond) -> tuple[Candidate, list[ir.Cond]] | None:
    """`c` with `shape(?a) == shape(?b)` replaced by `shape(?a)[i] == shape(?b)[i]` for every
    axis of the enumeration's shape (TASO's `shape(?t7)[1] == shape(?t10)[1]`), and those."""
    assert isinstance(cond, ir.ExprCond) and isinstance(cond.expr, ir.BinOp)
    left, right = cond.expr.left, cond.expr.right
    if not isinstance(left, ir.ShapeOf) or not isinstance(right, ir.ShapeOf) or not c.shape:
        return None
    dims: list[ir.Cond] = [ir.ExprCond(ir.BinOp("eq", _axis(left, i), _axis(right, i), ir.Prim.BOOL))
                           for i in range(len(c.shape))]
    conds = [d for k in c.rule.conds for d in (dims if k is cond else [k])]
    rule = replace(c.rule, conds=tuple(conds))
    return replace(c, rule=replace(rule, name=_stable_name(rule))), dims


def _axis(shape: ir.ShapeOf, i: int) -> ir.IndexOf:
    return ir.IndexOf(shape, ir.Const(i, ir.Prim.INT), ir.Prim.INT)


def _without_cond(candidate: Candidate, cond: ir.Cond) -> Candidate:
    rule = replace(candidate.rule, conds=tuple(c for c in candidate.rule.conds if c is not cond))
    return replace(candidate, rule=replace(rule, name=_stable_name(rule)))


def _with_rules(lang: ir.Language, kept: list[Candidate]) -> ir.Language:
    return replace(lang, rules=tuple(r for c in kept for r in c.rules))


def _without_derivable(lang: ir.Language, kept: list[Candidate], limits: Limits,
                       out_of_time: Callable[[], bool]) -> tuple[list[Candidate], bool]:
    """Ruler's last pass: from the dearest down, drop a rule the others derive; (the rules left,
    whether the pass finished before the deadline)."""
    rules = list(kept)
    for candidate in reversed(kept):
        if out_of_time():
            return rules, False
        others = [c for c in rules if c is not candidate]
        if others and Prover(_with_rules(lang, others), limits).prove(lang, candidate.rule).verdict is Verdict.DERIVED:
            rules = others
    return rules, True


def rules_text(lang: ir.Language, synthesis: Synthesis, header: str, declarations: str) -> str:
    """The kept rules as a `.eqr` file: `declarations` (the language without its rules), then one
    rule per line with where it came from."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += [declarations.rstrip(), ""]
    for c in synthesis.kept:
        lines += c.lines()
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
