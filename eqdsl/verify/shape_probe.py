"""A quick check-time probe for rules that union terms of different shapes (`eqdsl check`).

Contract: `shape_changing_rules(lang, tries, seed)` returns (rule, example) pairs where random small
shapes for the rule's variables make both sides well-shaped with different shapes. Only
unconditional single-pattern rules are probed (an `if` or `where` may be what keeps the shapes
equal), so every report is a real counterexample to the shape rules; `eqdsl verify` is the full
check.
"""
from __future__ import annotations

import random

from eqdsl import ir
from eqdsl.ir.evaluate import EvalError, Value
from eqdsl.ir.exprs import shape_key
from eqdsl.verify.examples import _FAILED, _collect_vars, _concrete_shape


def shape_changing_rules(lang: ir.Language, tries: int = 200, seed: int = 0) -> list[tuple[ir.Rule, str]]:
    rng = random.Random(seed)
    found = []
    for rule in lang.single_rules:
        if rule.conds or rule.wheres:
            continue
        variables: dict[str, ir.ValueType] = {}
        _collect_vars(rule.lhs[0], variables)
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
    return found


def _shape_or_none(lang: ir.Language, p: ir.Pattern, env: dict) -> tuple | None:
    try:
        out = _concrete_shape(lang, p, dict(env), {})
    except (EvalError, IndexError, TypeError, ZeroDivisionError, ValueError):
        return None
    return None if out is None or out is _FAILED or not isinstance(out, (tuple, list)) else tuple(out)
