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
from eqdsl.verify.examples import _FAILED, _concrete_shape


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
            drawn: dict[str, tuple[int, ...]] = {}
            for v in variables:
                rank = rng.randint(1, 4)
                env[shape_key(v)] = drawn[v] = tuple(rng.randint(1, 4) for _ in range(rank))
                env["?" + v] = rng.randint(0, 3)
            left, right = (_shape_or_none(lang, p, env) for p in (rule.lhs[0], rule.rhs[0]))
            if left is not None and right is not None and left != right:
                shapes = ", ".join(f"?{v}: {list(drawn[v])}" for v, t in variables.items()
                                   if isinstance(t, ir.SortType))
                found.append((rule, f"with {shapes} the left side has shape {list(left)}, the right "
                                    f"side {list(right)}"))
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
            shapes = [_concrete_shape(lang, p, dict(concrete.env), concrete.wheres) for p in (left, right)]
            if all(isinstance(x, (tuple, list)) for x in shapes) and tuple(shapes[0]) != tuple(shapes[1]):
                sizes = ", ".join(f"?{v}: {list(d)}" for v, d in sorted(assignment.sizes.items()))
                return (f"with {sizes} left pattern {k + 1} has shape {list(shapes[0])}, its right side "
                        f"{list(shapes[1])}")
    return None


def _shape_or_none(lang: ir.Language, p: ir.Pattern, env: dict) -> tuple | None:
    try:
        out = _concrete_shape(lang, p, dict(env), {})
    except (EvalError, IndexError, TypeError, ZeroDivisionError, ValueError):
        return None
    return None if out is None or out is _FAILED or not isinstance(out, (tuple, list)) else tuple(out)
