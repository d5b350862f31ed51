"""`eqdsl verify`'s checks of a language's analyses against its reference semantics.

Contract: `check_analyses(lang, sem, examples, seed)` returns, per analysis, one `RuleResult` per
analysis rule (`analysis:NAME:OP`: on `examples` random terms with OP on top, wherever the rule
sets a value, `means` holds of the term's value) and one for its merge (`analysis:NAME:merge`:
on values of random terms, the merge is commutative, associative and idempotent, and what it
says of a value is exactly what both merged values say: `means(merge(a, b), v)` if and only if
`means(a, v)` and `means(b, v)`; a merge that loses that, like `max` for constants that must
agree, hides a contradiction an unsound rule made). `merge agree` needs no check: egglog stops
on two different values. Guards over a checked analysis are then sound (`verify.analyses`).
"""
from __future__ import annotations

import time
from functools import partial
from typing import Any, Callable, Collection

import numpy as np

from eqdsl import ir
from eqdsl.verify.analyses import Drawn, TermDrawer, Undrawable, Unverifiable, means, merged
from eqdsl.verify.rules import Counterexample, RuleResult, Status, within
from eqdsl.verify.semantics import OpSemantics

PAIRS = 4  # merge checks: terms drawn per example
ATTEMPTS = 10  # draws per example until one sets the analysis (a free variable sets none)


class _Refuted(Exception):
    pass


def check_analyses(lang: ir.Language, sem: dict[str, OpSemantics], examples: int = 100, seed: int = 0,
                   only: Collection[str] | None = None, limit_s: float | None = None) -> list[RuleResult]:
    """`only`: the names of the checks to run (None: all); `limit_s`: seconds per check (`within`)."""
    drawer = TermDrawer(lang, sem)
    checks: list[tuple[str, Callable[[np.random.Generator], bool]]] = []
    for analysis in lang.analyses.values():
        checks += [(f"analysis:{analysis.name}:{op}", partial(_rule_holds, drawer, analysis, op))
                   for op in analysis.rules]
        if analysis.merge is not None:
            checks.append((f"analysis:{analysis.name}:merge", partial(_merge_is_meet, drawer, analysis)))
    return [within(limit_s, name, partial(_timed, name, one, examples, seed))
            for name, one in checks if only is None or name in only]


def _timed(name: str, one: Callable[[np.random.Generator], bool], examples: int, seed: int) -> RuleResult:
    """`one(rng)` per example: True when it checked something, False when nothing applied;
    `_Refuted` ends it with the message."""
    start, rng, valid = time.perf_counter(), np.random.default_rng(seed), 0
    try:
        for _ in range(examples):
            valid += any(one(rng) for _ in range(ATTEMPTS))
    except (_Refuted, Unverifiable) as err:
        message = str(err) if isinstance(err, _Refuted) else f"cannot be verified: {err}"
        return RuleResult(name, Status.FAILED, valid, time.perf_counter() - start,
                          Counterexample({}, {}, float("nan"), message))
    if valid:
        return RuleResult(name, Status.PASSED, valid, time.perf_counter() - start)
    return RuleResult(name, Status.VACUOUS, 0, time.perf_counter() - start,
                      note="no drawn term had its operands' analysis values set and was accepted by the shape rules "
                           "and the semantics (an analysis rule applies only where its operands have values)")


def _rule_holds(drawer: TermDrawer, analysis: ir.Analysis, op: str, rng: np.random.Generator) -> bool:
    try:
        term = drawer.draw(analysis.sort, rng, root=op)
    except Undrawable:
        return False  # nothing applied this time
    a = term.analyses.get(analysis.name)
    if a is None:
        return False
    if not means(analysis, a, term.value):
        raise _Refuted(f"{analysis.name}({term.text}) = {_shown(a)}, but the term's value is {_shown(term.value)}: "
                       f"`means` does not hold (the rule for '{op}' at {analysis.rules[op].span})")
    return True


def _merge_is_meet(drawer: TermDrawer, analysis: ir.Analysis, rng: np.random.Generator) -> bool:
    drawn = [drawer.draw(analysis.sort, rng) for _ in range(PAIRS)]
    terms = [t for t in drawn if t.analyses.get(analysis.name) is not None]
    if len(terms) < 2:
        return False
    a, b, c = (t.analyses[analysis.name] for t in (terms[0], terms[1], terms[-1]))
    laws = [("commutative", merged(analysis, a, b), merged(analysis, b, a)), ("idempotent", merged(analysis, a, a), a),
            ("associative", merged(analysis, merged(analysis, a, b), c), merged(analysis, a, merged(analysis, b, c)))]
    for law, left, right in laws:
        if left != right:
            raise _Refuted(f"the merge of '{analysis.name}' is not {law}: {_shown(left)} vs {_shown(right)} "
                           f"(old, new drawn from {_shown(a)}, {_shown(b)}, {_shown(c)})")
    _exact(analysis, terms[0], terms[1], merged(analysis, a, b))
    return True


def _exact(analysis: ir.Analysis, t: Drawn, u: Drawn, m: Any) -> None:
    a, b = t.analyses[analysis.name], u.analyses[analysis.name]
    for v in (t.value, u.value):
        both = means(analysis, a, v) and means(analysis, b, v)
        if means(analysis, m, v) != both:
            what = "is unsound: it claims more than" if both else "loses what"
            raise _Refuted(f"the merge of '{analysis.name}' {what} the merged values say: merge({_shown(a)}, "
                           f"{_shown(b)}) = {_shown(m)}, and of the value {_shown(v)} `means` gives "
                           f"{means(analysis, m, v)} for the merge but {both} for both values (of {t.text} and "
                           f"{u.text}); a merge must say exactly what both say (two constants that differ "
                           "are a contradiction: `merge agree`)")


def _shown(v: Any) -> str:
    if isinstance(v, np.ndarray):  # a tensor's value: one line, its first elements
        return f"a {list(v.shape)} tensor " + np.array2string(v.ravel(), threshold=8, edgeitems=3, precision=4,
                                                              separator=", ", max_line_width=10**6)
    return f"{v:.6g}" if isinstance(v, float) else str(v)
