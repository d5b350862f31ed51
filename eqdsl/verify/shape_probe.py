"""A quick check-time probe for rules that union terms of different shapes (`eqdsl check`).

Contract: `shape_changing_rules(lang, tries, seed)` returns (rule, example) pairs where random small
shapes for the rule's variables make both sides well-shaped with different shapes. Only
unconditional single-pattern rules are probed by drawing shapes alone (an `if` or `where` may be
what keeps the shapes equal); multi-pattern rules are probed at the sizes `eqdsl verify` would
draw (`verify.examples.ExampleSpace`, which meets their `where`s and shape conditions), each left
pattern against its right one. Every report is a real counterexample to the shape rules; `eqdsl
verify` is the full check.
"""
from __future__ import annotations

import random

from eqdsl import ir
from eqdsl.ir.evaluate import EvalError, Value
from eqdsl.ir.exprs import pattern_vars, shape_key
from eqdsl.verify.examples import _concrete_shape


def shape_changing_rules(lang: ir.Language, tries: int = 200, seed: int = 0) -> list[tuple[ir.Rule, str]]:
    rng = random.Random(seed)
    found = []
    for rule in lang.single_rules:
        if rule.conds or rule.wheres:
            continue
        variables: dict[str, ir.ValueType] = {}
        pattern_vars(rule.lhs[0], variables)
        for _ in range(tries):
            env: dict[str, Value] = {}
            drawn: dict[str, Value] = {}
            for v, t in variables.items():
                env[shape_key(v)] = drawn[v] = _drawn_shape(lang, t, rng)
                env["?" + v] = rng.randint(0, 3)
            left, right = (_shape_or_none(lang, p, env) for p in (rule.lhs[0], rule.rhs[0]))
            if left is not None and right is not None and left != right:
                shapes = ", ".join(f"?{v}: {_shown(drawn[v])}" for v, t in variables.items()
                                   if isinstance(t, ir.SortType))
                found.append((rule, f"with {shapes} the left side has shape {_shown(left)}, the right "
                                    f"side {_shown(right)}"))
                break
    for rule in lang.multi_rules:
        example = _multi_pattern_mismatch(lang, rule, tries, rng)
        if example is not None:
            found.append((rule, example))
    return found


def _multi_pattern_mismatch(lang: ir.Language, rule: ir.Rule, tries: int, rng: random.Random) -> str | None:
    """Where the sizes verify draws for `rule` give a left pattern a shape other than its right
    one's: which pair, and the shapes."""
    from eqdsl.verify.examples import ExampleSpace

    space = ExampleSpace(lang, rule)
    for ranks in space.rank_choices[:max(1, tries // 20)]:
        hints = [rng.randint(1, 6) for _ in range(space.hint_count(ranks))]
        assignment = space.solve(ranks, hints)
        concrete = None if assignment is None else space.concrete(assignment)
        if assignment is None or concrete is None:
            continue
        for k, (left, right) in enumerate(zip(rule.lhs, rule.rhs)):
            one, other = (_comparable(_concrete_shape(lang, p, dict(concrete.env), concrete.wheres))
                          for p in (left, right))
            if one is not None and other is not None and one != other:
                sizes = ", ".join(f"?{v}: {list(d)}" for v, d in sorted(assignment.sizes.items()))
                return f"with {sizes} left pattern {k + 1} has shape {_shown(one)}, its right side {_shown(other)}"
    return None


def _drawn_shape(lang: ir.Language, t: ir.ValueType, rng: random.Random) -> Value:
    """A random small shape of a variable's sort: a length for an `Int` shape, else dimensions."""
    if lang.holds_vectors(t):
        return rng.randint(1, 4)
    return tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 4)))


def _shown(shape: Value) -> str:
    return str(list(shape)) if isinstance(shape, (tuple, list)) else str(shape)


def _shape_or_none(lang: ir.Language, p: ir.Pattern, env: dict) -> Value | None:
    """A side's shape (dimensions or an `Int` length), None where a shape rule refuses it."""
    try:
        return _comparable(_concrete_shape(lang, p, dict(env), {}))
    except (EvalError, IndexError, TypeError, ZeroDivisionError, ValueError):
        return None


def _comparable(out: object) -> Value | None:
    if isinstance(out, (tuple, list)):
        return tuple(out)
    return out if isinstance(out, int) and not isinstance(out, bool) else None
