"""`eqdsl synthesize LANGUAGE`: a small verified rule set inferred from the reference semantics.

Contract: `synthesize(lang, sem, space, limits)` enumerates and fingerprints terms
(`eqdsl.synth.enumerate`, once per shape instance, side by side in `checked.processes_for`'s
processes where it runs inside them), turns each pair of terms with one fingerprint into a
candidate rule (the larger term on the left; the right side's variables among the left's;
variables renamed in order of appearance, so a law is one candidate however its variables are
named), orders the candidates cheapest first (fewest operators in all; then the most distinct
variables, so that a law comes before its instances `f(?a, ?a)`; then text), and keeps a small
set, as Ruler minimizes: each candidate the kept rules already derive (`eqdsl.synth.derive`, at two instances, under
`limits`) is dropped, else it is screened at sizes where no dimensions coincide
(`verify.rules.refuted`: laws of square matrices fall here), verified
(`eqdsl.verify.rules.verify_rule`, `examples` examples) and kept if it passes (with `generalize`,
its literal parameters lifted to variables where it holds at every value: `eqdsl.synth.generalize`). A last pass drops a
kept rule the others derive; the constant folds of the language's analyses (`eqdsl.synth.folds`) are
verified and kept after it, then the rules guarded by a Bool analysis (`eqdsl.synth.guards`: two
terms equal wherever both are defined), each dropped where the kept rules derive it with its
guards assumed, else verified; with `generalize`, each kept rule is then tried at the n-ary forms of
a binary operator at its root (`eqdsl.synth.arity`: a concat law at concat3..5), each lift kept
where it verifies. Then the multi-pattern merges lifted from the candidates
(`eqdsl.synth.merges`) are verified the same way and kept after them, unless an earlier merge
covers one (no derivability between multi-pattern rules).
Every kept rule passed `verify`; its name is stable (`syn-` and a hash of its text) and it
records where it came from (size, fingerprint class). `deadline` (`time.monotonic()`) ends the
search early with what was verified so far (`Synthesis.complete` False).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from eqdsl import ir
from eqdsl.schedule.runner import Limits
from eqdsl.synth.arity import Forms, lifted, operator_count, variadic_forms
from eqdsl.synth.candidates import (
    Candidate,
    cheapest_first,
    dimension_by_dimension,
    rule_candidates,
    shapes_alike,
    without_cond,
)
from eqdsl.synth.checked import confirmed, passes, passes_twice, side_by_side
from eqdsl.synth.derive import Prover, Verdict
from eqdsl.synth.enumerate import Space, enumerate_terms
from eqdsl.synth.folds import fold_rules
from eqdsl.synth.generalize import generalized
from eqdsl.synth.guards import conditioned_candidates, guarded_candidates
from eqdsl.synth.merges import guarded, instance_of, joints, merge_candidates
from eqdsl.verify.examples import DISTINCT_HINTS

BATCH = 64  # candidates whose derivability is tried in one e-graph before one by one
# A candidate counts as derived where it is at two instances: one instance's sizes may meet the
# conditions of kept rules (shape(?a)[1] == shape(?b)[1]) by chance, and the law be dropped for it
INSTANCES = (DISTINCT_HINTS, (3, 5, 2, 6, 4))


@dataclass
class Synthesis:
    terms: int = 0
    classes: int = 0
    candidates: int = 0
    kept: list[Candidate] = field(default_factory=list)
    rejected: int = 0  # candidates `verify` failed
    merges: int = 0  # of `kept`, the multi-pattern rules (the last ones)
    lifted: int = 0  # of `kept`, the rules lifted to n-ary forms (before the merges)
    folds: int = 0  # of `kept`, the constant folds by analyses (`eqdsl.synth.folds`)
    guarded: int = 0  # of `kept`, the rules guarded by a Bool analysis (`eqdsl.synth.guards`)
    prior: int = 0  # of `kept`, the first: an earlier set's rules, kept as they are (`--prior`)
    complete: bool = True
    seconds: float = 0.0


def synthesize(lang: ir.Language, sem: dict[str, Any], space: Space, limits: Limits, examples: int = 100,
               deadline: float | None = None, progress: Callable[[str], None] = lambda note: None,
               kept_one: Callable[[Synthesis], None] = lambda partial: None, generalize: bool = False,
               prior: tuple[Candidate, ...] = ()) -> Synthesis:
    """See the module docstring; `kept_one(partial)` after each rule kept (a checkpoint). `prior`
    (an earlier set's rules, `candidates.prior_candidates`) counts as kept from the start: what
    it derives is not kept again, and none of it is dropped."""
    t0 = time.perf_counter()
    out_of_time = _out_of_time(deadline)
    pool: dict[str, Candidate] = {}
    conditional: dict[str, Candidate] = {}  # guarded by an analysis
    result = Synthesis(kept=list(prior), prior=len(prior))
    at = ", ".join("x".join(map(str, shape)) for shape in space.shapes) if _shaped(lang) else ""
    progress(f"enumerating terms of up to {space.size} operators" + (f" at shapes {at}" if at else ""))
    for found in side_by_side(lang, sem, _enumerated, [(space, shape, deadline) for shape in space.shapes]):
        for candidate in found.candidates:
            pool.setdefault(candidate.text, candidate)
        for candidate in found.conditional:
            conditional.setdefault(candidate.text, candidate)
        result.terms, result.classes = result.terms + found.terms, result.classes + found.classes
    ordered = sorted(pool.values(), key=cheapest_first)
    result.candidates = len(ordered)
    progress(f"{result.terms} terms, {result.classes} classes, {len(ordered)} candidates")
    widen = (lambda c, known: generalized_candidate(lang, sem, c, examples, known)) if generalize else \
        (lambda c, known: c)
    result.complete = _minimize(lang, sem, ordered, limits, examples, result, out_of_time, progress, kept_one, widen)
    if result.complete:
        result.kept, result.complete = _without_derivable(lang, result.kept, limits, out_of_time, result.prior)
    if result.complete:
        result.complete = _folds(lang, sem, space.ops, examples, result, out_of_time, progress, kept_one)
    if result.complete and conditional:
        result.complete = _guarded(lang, sem, sorted(conditional.values(), key=cheapest_first), limits, examples,
                                   result, out_of_time, progress, kept_one)
    if result.complete and generalize:
        forms = variadic_forms(lang, lambda rule: passes(lang, sem, Candidate(rule, 0, 0), examples, seed=0))
        result.complete = _at_variadic_forms(lang, sem, forms, examples, result, out_of_time, progress, kept_one)
    if result.complete:
        result.complete = _merges(lang, sem, ordered, examples, result, out_of_time, progress, kept_one, widen,
                                  space.shapes)
    result.seconds = time.perf_counter() - t0
    return result


@dataclass(frozen=True)
class _Enumerated:
    """What the terms of one shape instance give: counts and candidates (not the terms themselves,
    millions of them, which stay in the process that enumerated them)."""
    terms: int
    classes: int
    candidates: list[Candidate]
    conditional: list[Candidate]  # guarded by an analysis


def _enumerated(lang: ir.Language, sem: dict[str, Any], space: Space, shape: tuple[int, ...],
                deadline: float | None) -> _Enumerated:
    """The candidates of the terms with every shaped variable of shape `shape` (`enumerate_terms`,
    stopped at `deadline`)."""
    found = enumerate_terms(lang, sem, space, shape, _out_of_time(deadline))
    at = _instance(lang, shape)
    return _Enumerated(len(found.terms), len(found.classes), rule_candidates(found, at),
                       [*guarded_candidates(lang, found), *conditioned_candidates(lang, found, at)])


def _out_of_time(deadline: float | None) -> Callable[[], bool]:
    """Whether `deadline` (`time.monotonic()`, None: none) has passed."""
    return (lambda: False) if deadline is None else (lambda: time.monotonic() > deadline)


def _shaped(lang: ir.Language) -> bool:
    return any(s.shape_type is not None for s in lang.sorts.values())


def _instance(lang: ir.Language, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape a candidate was seen at: None without shapes, the first dimension where every
    shaped sort is a vector (an `Int` shape)."""
    shaped = [s for s in lang.sorts.values() if s.shape_type is not None]
    return None if not shaped else shape[:1] if all(s.holds_vectors for s in shaped) else shape


Widen = Callable[[Candidate, frozenset[str]], Candidate]  # a verified candidate, generalized or as it is


def _minimize(lang: ir.Language, sem: dict[str, Any], pool: list[Candidate], limits: Limits, examples: int,
              result: Synthesis, out_of_time: Callable[[], bool], progress: Callable[[str], None],
              kept_one: Callable[[Synthesis], None], widen: Widen) -> bool:
    """Cheapest first: a candidate the kept rules derive is dropped, else screened, verified and
    kept if it passes (and added to the prover's e-graph)."""
    prover = _prover_of(lang, result.kept, limits)
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
            if passed is not None:
                known = frozenset(c.text for c in result.kept)
                passed = widen(passed, known)
            if passed is None:
                result.rejected += 1
            elif passed.text not in known:  # else an instance of a kept rule the prover missed, generalized
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
    """The candidate if it passes the screen and `verify` (and `checked.confirmed`, 5x the
    examples on other seeds); else, where it has shaped variables,
    the candidate with their shapes alike, each condition then dropped that it passes without
    (`shape(?b) == shape(?c)`, not every variable's) or else cut to the axes it needs
    (`shape(?a)[1] == shape(?b)[1]`); else None."""
    def passes_at(c: Candidate) -> bool:
        return passes(lang, sem, c, examples, seed=0)

    if passes_twice(lang, sem, candidate, examples):  # 100 examples missed a grouped conv's case once
        return candidate
    alike = shapes_alike(lang, candidate)
    if alike is None or not passes_at(alike):
        return None
    steps = [alike]
    for cond in alike.rule.conds:
        weaker = without_cond(steps[-1], cond)
        if passes_at(weaker):
            steps.append(weaker)
            continue
        per_dimension = dimension_by_dimension(steps[-1], cond)
        if per_dimension is not None and passes_at(per_dimension[0]):
            steps.append(per_dimension[0])
            for dim in per_dimension[1]:
                if passes_at(weaker := without_cond(steps[-1], dim)):
                    steps.append(weaker)
    # each step looked for the weakest condition that passes: where one passed only because the
    # examples missed a case, 5x the examples on other seeds should find it; then a stronger step
    return next((step for step in reversed(steps) if confirmed(lang, sem, step, examples)), None)


def generalized_candidate(lang: ir.Language, sem: dict[str, Any], c: Candidate, examples: int,
                          known: frozenset[str] = frozenset()) -> Candidate:
    """`c` with its literal parameters lifted to variables where it holds at every value
    (`eqdsl.synth.generalize`; each step verified with `examples`, the result then as `_verified`
    verifies, `checked.confirmed`: `c` itself where that fails). A result
    whose text is in `known` (a kept rule's) is returned without that last check."""
    rule = generalized(c.rule, lambda r: passes(lang, sem, replace(c, rule=r), examples, seed=0))
    wider = replace(c, rule=rule)
    if rule is c.rule or wider.text in known or confirmed(lang, sem, wider, examples):
        return wider
    return c


def _folds(lang: ir.Language, sem: dict[str, Any], ops: tuple[str, ...], examples: int, result: Synthesis,
           out_of_time: Callable[[], bool], progress: Callable[[str], None],
           kept_one: Callable[[Synthesis], None]) -> bool:
    """The constant folds of `lang`'s analyses (`eqdsl.synth.folds`) at `ops` (all where empty),
    each kept where it passes `verify` (once: a fold is sound where its analysis is, which `verify`
    checks as well). Whether it finished in time."""
    known = {c.text for c in result.kept}
    for rule in (r for r in fold_rules(lang) if not ops or r.lhs[0].op in ops):
        if out_of_time():
            return False
        if Candidate(rule, 0, None).text in known:  # a prior set's
            continue
        fold = Candidate(rule, operator_count(rule), None, note=f"a fold by analysis {_read_analysis(rule)}")
        progress(f"verifying {fold.note} at {rule.lhs[0].op}")
        if passes(lang, sem, fold, examples, seed=0):  # sound where the analysis is, which verify checks
            result.kept.append(fold)
            result.folds += 1
            kept_one(result)
        else:
            result.rejected += 1
    return True


def _guarded(lang: ir.Language, sem: dict[str, Any], pool: list[Candidate], limits: Limits, examples: int,
             result: Synthesis, out_of_time: Callable[[], bool], progress: Callable[[str], None],
             kept_one: Callable[[Synthesis], None]) -> bool:
    """The candidates guarded by a Bool analysis (`eqdsl.synth.guards`), cheapest first: one the
    kept rules derive with its guards assumed is dropped, else kept where it passes `verify`
    twice. Whether it finished in time."""
    prover = _prover_of(lang, result.kept, limits)
    for k, candidate in enumerate(pool):
        if out_of_time():
            return False
        progress(f"{result.guarded} guarded rules kept, {len(pool) - k} guarded candidates left")
        if all(prover.prove(lang, candidate.rule, hints).verdict is Verdict.DERIVED for hints in INSTANCES):
            continue
        if passes_twice(lang, sem, candidate, examples):
            result.kept.append(candidate)
            result.guarded += 1
            prover.add(candidate.rule)
            kept_one(result)
        else:
            result.rejected += 1
    return True


def _read_analysis(rule: ir.Rule) -> str:
    return next(value.analysis for _, value in rule.wheres if isinstance(value, ir.AnalysisOf))


def _at_variadic_forms(lang: ir.Language, sem: dict[str, Any], forms: Forms, examples: int, result: Synthesis,
                       out_of_time: Callable[[], bool], progress: Callable[[str], None],
                       kept_one: Callable[[Synthesis], None]) -> bool:
    """Each kept rule at the n-ary `forms` of a binary operator at its root (`eqdsl.synth.arity`),
    kept where it passes as `generalized_candidate`'s results do. Whether it finished in time."""
    at_forms = [(binary, form, k) for binary, found in forms.items() for form, k in found]
    for c in list(result.kept):
        for binary, form, k in at_forms:
            if out_of_time():
                return False
            rule = lifted(c.rule, binary, form, k)
            if rule is None:
                continue
            wider = replace(c, rule=rule, size=operator_count(rule), note=f"{c.rule.name} at {form}")
            progress(f"verifying {wider.note}")
            if passes_twice(lang, sem, wider, examples):
                result.kept.append(wider)
                result.lifted += 1
                kept_one(result)
    return True


def _merges(lang: ir.Language, sem: dict[str, Any], pool: list[Candidate], examples: int, result: Synthesis,
            out_of_time: Callable[[], bool], progress: Callable[[str], None],
            kept_one: Callable[[Synthesis], None], widen: Widen, shapes: tuple[tuple[int, ...], ...]) -> bool:
    """The multi-pattern rules lifted from `pool` (`eqdsl.synth.merges`), cheapest first: one an
    earlier kept merge covers is dropped, else verified (its conditions found as a single
    rule's are), guarded and kept. Whether it finished before the deadline."""
    kept = [c for c in result.kept if c.rule.is_multi]  # a prior set's
    rank = len(shapes[0]) if shapes and _shaped(lang) else 0
    lifted = merge_candidates(lang, pool, joints(lang, sem, rank) if rank else [])
    for k, candidate in enumerate(lifted):
        if out_of_time():
            return False
        if any(instance_of(general, candidate) for general in kept):
            continue
        passed = _verified(lang, sem, candidate, examples)
        if passed is None:
            result.rejected += 1
        elif (wider := guarded(widen(passed, frozenset()))).text not in {c.text for c in kept}:
            kept.append(wider)
            result.kept.append(kept[-1])
            result.merges += 1
            kept_one(result)
        progress(f"{result.merges} merges kept, {len(lifted) - k - 1} lifted equations left")
    return True


def _with_rules(lang: ir.Language, kept: list[Candidate]) -> ir.Language:
    return replace(lang, rules=tuple(r for c in kept for r in c.rules))


def _prover_of(lang: ir.Language, kept: list[Candidate], limits: Limits) -> Prover:
    """A prover that grows, with the single-pattern rules of `kept` in it."""
    prover = Prover(_with_rules(lang, []), limits)
    for rule in (r for c in kept for r in c.rules if not r.is_multi):
        prover.add(rule)
    return prover


def _without_derivable(lang: ir.Language, kept: list[Candidate], limits: Limits,
                       out_of_time: Callable[[], bool], fixed: int = 0) -> tuple[list[Candidate], bool]:
    """Ruler's last pass: from the dearest down, drop a rule the others derive, but for the first
    `fixed`; (the rules left, whether the pass finished before the deadline). One e-graph of
    every kept rule, each proof with the others only (`Prover.prove(among=...)`)."""
    rules = list(kept)
    prover = Prover(_with_rules(lang, kept), limits)
    for candidate in reversed(kept[fixed:]):
        if out_of_time():
            return rules, False
        others = [c for c in rules if c is not candidate]
        among = [r for c in others for r in c.rules]
        if others and prover.prove(lang, candidate.rule, among=among).verdict is Verdict.DERIVED:
            rules = others
    return rules, True
