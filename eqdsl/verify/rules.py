"""`eqdsl verify`: check every rule numerically against the reference semantics, with Hypothesis.

Contract: `verify_rule(lang, sem, rule, examples, seed)` returns a `RuleResult`: `passed` when
`examples` valid examples (sizes meeting every requirement of both sides, see `examples.py`)
evaluated equal on both sides (`allclose`, every output pair of a multi-pattern rule) and every
application's result had the shape its shape rule gives; `failed` with a shrunk counterexample
(sizes, values, max error); `vacuous` when no valid example could be drawn. Seeded: the same seed
gives the same examples. `within(limit_s, name, check)` runs one check under a time limit
(`timed out` past it).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable

import numpy as np
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky, HypothesisDeprecationWarning, Unsatisfiable, UnsatisfiedAssumption

from eqdsl import ir
from eqdsl.ir.text import pattern_text
from eqdsl.languages.base import External, Split, value_shape
from eqdsl.verify.analyses import Unverifiable, guard_values
from eqdsl.verify.examples import Assignment, Concrete, ExampleSpace
from eqdsl.verify.leaves import draw_leaf
from eqdsl.verify.semantics import (
    Leaf,
    OpSemantics,
    SemanticsError,
    agree,
    evaluate_pattern,
    largest_difference,
    magnitude,
)
from eqdsl.worker import TimeUp, alarm


class Status(Enum):
    PASSED = "pass"
    FAILED = "FAIL"
    VACUOUS = "VACUOUS"
    TIMED_OUT = "TIMEOUT"  # neither passed nor failed: stopped at the per-rule time limit


@dataclass(frozen=True)
class Counterexample:
    sizes: dict[str, tuple[int, ...]]
    values: dict[str, Any]  # Int variables and `where` values
    max_error: float
    message: str
    inputs: dict[str, Any] = field(default_factory=dict)  # the drawn tensor / scalar leaves


@dataclass(frozen=True)
class RuleResult:
    name: str
    status: Status
    examples: int
    seconds: float
    counterexample: Counterexample | None = None
    note: str = ""  # VACUOUS: why no example was valid, where one reason stood out; TIMED_OUT: the limit


def within(limit_s: float | None, name: str, check: Callable[[], RuleResult]) -> RuleResult:
    """`check()`, or `TIMED_OUT` once it has run `limit_s` seconds (None: no limit): a reference
    function that never returns costs one rule, not the whole run. The stop is raised outside
    Hypothesis's own code (which would take it for a flaky example, or print and drop it in its
    garbage-collector hook), every `AGAIN_S` until it lands, and a result that comes back after
    the deadline is `TIMED_OUT` whatever it says. A limit holds in the main thread only."""
    start = time.perf_counter()
    result = None
    try:
        with alarm(limit_s, TimeUp, AGAIN_S, spared=("hypothesis",)) as deadline:
            result = check()
    except TimeUp:
        pass
    if result is not None and not deadline.expired:
        return result
    return RuleResult(name, Status.TIMED_OUT, 0, time.perf_counter() - start,
                      note=f"stopped after {limit_s:g} s (`--time-limit`): a reference function that does not "
                           "return, or examples too slow to evaluate")


AGAIN_S = 0.25


class _Failure(Exception):
    def __init__(self, found: Counterexample) -> None:
        super().__init__(found.message)
        self.found = found


@dataclass
class _Tally:
    valid: int = 0
    undefined: str = ""  # the last reason an example was undefined on both sides


def verify_rule(lang: ir.Language, sem: dict[str, OpSemantics], rule: ir.Rule,
                examples: int = 100, seed: int = 0, shrink: bool = True) -> RuleResult:
    """See the module docstring; `shrink=False` reports the first counterexample as found (a
    caller that only needs pass or fail: `eqdsl synthesize`)."""
    start = time.perf_counter()
    space = ExampleSpace(lang, rule)
    if not space.rank_choices:
        return RuleResult(rule.name, Status.VACUOUS, 0, time.perf_counter() - start)
    tally = _Tally()
    test = _hypothesis_test(space, sem, tally, examples, seed, shrink)
    try:
        test()
    except Unverifiable as err:
        return RuleResult(rule.name, Status.FAILED, tally.valid, time.perf_counter() - start,
                          Counterexample({}, {}, float("nan"), f"cannot be verified: {err}"))
    except _Failure as err:
        return RuleResult(rule.name, Status.FAILED, tally.valid, time.perf_counter() - start, err.found)
    except Unsatisfiable:
        pass
    except Flaky as err:  # not reproducible on replay: never a traceback, never a pass
        return RuleResult(rule.name, Status.FAILED, tally.valid, time.perf_counter() - start,
                          Counterexample({}, {}, float("nan"), "cannot be verified: an example did not "
                                         f"replay the same ({type(err).__name__}); run it again"))
    if tally.valid > 0:
        return RuleResult(rule.name, Status.PASSED, tally.valid, time.perf_counter() - start)
    note = f"each example drawn failed a condition or was undefined on both sides, e.g. {tally.undefined}" \
        if tally.undefined else ""
    return RuleResult(rule.name, Status.VACUOUS, 0, time.perf_counter() - start, note=note)


def refuted(lang: ir.Language, sem: dict[str, OpSemantics], rule: ir.Rule, samples: int = 4, seed: int = 0) -> bool:
    """Whether `rule` fails on one of `samples` random examples at sizes where no two dimensions
    coincide unless required (`ExampleSpace.distinct`): a screen much cheaper than `verify_rule`
    (no Hypothesis) for a candidate seen at one shape only (a law of square matrices). False
    proves nothing."""
    space = ExampleSpace(lang, rule)
    sized = space.distinct() if space.rank_choices else None
    if sized is None:
        return False
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():  # `assume` outside a Hypothesis test: it raises, which is what we want
        warnings.simplefilter("ignore", HypothesisDeprecationWarning)
        for _ in range(samples):
            try:
                _check_example(space, sem, *sized, rng)
            except _Failure:
                return True
            except UnsatisfiedAssumption:
                continue
    return False


def _hypothesis_test(space: ExampleSpace, sem, tally: _Tally, examples: int, seed: int, shrink: bool = True):
    config = settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                      suppress_health_check=list(HealthCheck), print_blob=False,
                      report_multiple_bugs=False,
                      phases=[Phase.generate, Phase.shrink] if shrink else [Phase.generate])

    @hypothesis_seed(seed)
    @config
    @given(st.data())
    def check(data) -> None:
        ranks = data.draw(st.sampled_from(space.rank_choices), label="ranks")
        n = space.hint_count(ranks)
        hints = data.draw(st.lists(st.integers(1, space.max_dim), min_size=n, max_size=n), label="sizes")
        assignment = space.solve(ranks, hints)
        assume(assignment is not None)
        assert assignment is not None  # assume() above ends the example otherwise
        concrete = space.concrete(assignment)
        assume(concrete is not None)
        assert concrete is not None
        rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), label="data seed"))
        _check_example(space, sem, assignment, concrete, rng, tally)
        tally.valid += 1

    return check


def _check_example(space: ExampleSpace, sem, a: Assignment, c: Concrete, rng: np.random.Generator,
                   tally: _Tally | None = None) -> None:
    env = _values(space, a, c, rng)
    if space.analysed_rule is not space.rule:  # `if nonzero(?x)`: ?x drawn as a term, its analyses as egglog sets them
        guarded = guard_values(space.lang, sem, space.analysed_rule, env, rng)
        assume(guarded is not None)
        env.update(guarded or {})
    memo: dict[ir.Pattern, Any] = {}
    rule = space.rule
    try:
        assume(_class_conditions_hold(rule, sem, env, memo))
    except SemanticsError:
        assume(False)  # a condition that cannot be evaluated here does not hold
    sides = [(_side(lhs, sem, env, memo), _side(r, sem, env, memo)) for lhs, r in zip(rule.lhs, rule.rhs)]
    for left, right in sides:
        if isinstance(left, SemanticsError) and isinstance(right, SemanticsError):
            if tally is not None:
                tally.undefined = str(left)
            assume(False)  # undefined on both sides (x / 0 both ways): no evidence either way
        if isinstance(left, SemanticsError) or isinstance(right, SemanticsError):
            err = left if isinstance(left, SemanticsError) else right
            which = "left" if err is left else "right"
            _fail(a, c, float("nan"), f"only the {which} side is undefined here: {err}"
                  + _disequality_notes(rule, sem, env, memo), env)
    for p, value in memo.items():
        want = space.lang.sorts[space.lang.ops[p.op].result].dims(c.shape_of(p)) if isinstance(p, ir.PApp) else None
        if isinstance(p, ir.PApp) and want is not None and not isinstance(value, tuple) \
                and value_shape(value) != tuple(want):
            _fail(a, c, float("inf"), f"'{p.op}' gave a result of shape {list(value_shape(value))}; its shape "
                                      f"rule says {list(want)}: the shape rule and the semantics disagree")
    # float64 rounding grows with the largest intermediate value (edge values reach 1e8, and a
    # matmul of such cancels): compare to that scale, not to 1e-8 alone
    atol = max(1e-8, ROUNDING * max((magnitude(v) for v in memo.values()), default=0.0))
    for i, (left, right) in enumerate(sides):
        if not agree(left, right, atol=atol):
            where = f" (output {i})" if len(sides) > 1 else ""
            if (shapes := _shapes_differ(left, right)) is not None:
                _fail(a, c, float("inf"), f"left and right sides have different shapes{where}: {shapes}", env)
            _fail(a, c, largest_difference(left, right), f"left and right sides differ{where}"
                  + _disequality_notes(rule, sem, env, memo), env)


def _shapes_differ(left: Any, right: Any) -> str | None:
    """`[2, 3] vs [3, 2]` where the two values' shapes differ (or one holds several outputs)."""
    def shape(v: Any) -> str:
        return f"{len(v)} outputs" if isinstance(v, tuple) else str(list(value_shape(v)))

    several = isinstance(left, tuple), isinstance(right, tuple)
    if all(several) or not any(several) and value_shape(left) == value_shape(right):
        return None
    return f"{shape(left)} vs {shape(right)}"


def _side(pattern: ir.Pattern, sem, env, memo) -> Any:
    try:
        return evaluate_pattern(pattern, sem, env, memo)
    except SemanticsError as err:
        return err


def _fail(a: Assignment, c: Concrete, error: float, message: str, env: dict[str, Any] | None = None) -> None:
    inputs = {k: v for k, v in (env or {}).items() if isinstance(v, (np.ndarray, float))}
    raise _Failure(Counterexample(dict(a.sizes), {**a.ints, **c.wheres}, error, message, inputs))


def _values(space: ExampleSpace, a: Assignment, c: Concrete, rng: np.random.Generator) -> dict[str, Any]:
    env: dict[str, Any] = dict(c.wheres)
    same_shape: dict[tuple[int, ...], Any] = {}
    for v, t in space.vars.items():
        if v in a.ints:
            env[v] = a.ints[v]
        elif t == ir.Prim.INTS:
            env[v] = a.sizes[v]
        elif t == ir.Prim.STR:
            env[v] = "s"
        else:
            shape = tuple(a.sizes.get(v, ()))
            fields = space.has_fields(v)
            dims = shape[1:] if fields else shape
            drawn = draw_leaf(rng, dims, same_shape.get(shape))
            same_shape[shape] = drawn
            env[v] = Split(drawn, shape[0]) if fields else drawn if v in a.sizes else float(drawn)
    return env


ROUNDING = 1e-12  # absolute tolerance per unit of the largest intermediate: ~4,500 float64 epsilons


def _class_conditions_hold(rule: ir.Rule, sem, env, memo) -> bool:
    """The guards between terms as egglog applies them. `==` means "in one e-class", which sound
    rules only ever make of equal values: an example whose two sides differ is not a match.
    `!=` means "not known equal *now*" and guarantees nothing about values: it filters nothing,
    so a rule guarded by it must hold where the two sides are equal too."""
    for cond in rule.conds:
        if isinstance(cond, ir.ClassCond) and cond.equal:
            same = agree(evaluate_pattern(cond.left, sem, env, memo), evaluate_pattern(cond.right, sem, env, memo))
            if not same:
                return False
    return True


def _disequality_notes(rule: ir.Rule, sem, env, memo) -> str:
    """Why a `!=` guard did not stop this failing example: its two sides are equal here."""
    notes = []
    for cond in rule.conds:
        if isinstance(cond, ir.ClassCond) and not cond.equal:
            try:
                same = agree(evaluate_pattern(cond.left, sem, env, memo),
                             evaluate_pattern(cond.right, sem, env, memo))
            except SemanticsError:
                continue
            if same:
                notes.append(f"`{pattern_text(cond.left)} != {pattern_text(cond.right)}` is e-class "
                             "disequality (not known equal now), not value inequality: here both sides "
                             "are equal")
    return "".join(f"; {n}" for n in notes)


def operator_rules(lang: ir.Language, sem: dict[str, OpSemantics]) -> list[ir.Rule]:
    """One identity rule `op(?a, ...) => op(?a, ...)` per computed operator: verifying it runs the
    operator on valid random sizes and compares its result's shape with the shape rule's."""
    rules = []
    for op in lang.ops.values():
        if isinstance(sem.get(op.name), (Leaf, External)):
            continue
        app = _application(lang, sem, op, depth=0)
        if app is not None:
            rules.append(ir.Rule(f"op:{op.name}", (app,), (app,), (), (), op.span))
    return rules


def _application(lang: ir.Language, sem, op: ir.Operator, depth: int, prefix: str = "a") -> ir.PApp | None:
    args: list[ir.Pattern] = []
    for i, param in enumerate(op.params):
        name = f"{prefix}{i}"
        if isinstance(param.type, ir.SortType) and not _drawable(lang, sem, param.type.name):
            producer = next((o for o in lang.ops.values() if o.result == param.type.name
                             and not isinstance(sem.get(o.name), Leaf)), None)
            if producer is None or depth > 1:
                return None
            nested = _application(lang, sem, producer, depth + 1, prefix=f"{name}_")
            if nested is None:
                return None
            args.append(nested)
        else:
            args.append(ir.PVar(name, param.type))
    return ir.PApp(op.name, tuple(args), op.span)


def _drawable(lang: ir.Language, sem, sort: str) -> bool:
    """A sort whose values can be drawn directly: some input operator (a Leaf) produces it."""
    return any(o.result == sort and isinstance(sem.get(o.name), Leaf) for o in lang.ops.values())
