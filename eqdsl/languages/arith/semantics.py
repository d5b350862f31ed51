"""Reference semantics of `arith` (rulesets/arith.eqr) over float64 reals.

`div` is real division and `shl(a, k)` is a * 2**k: the laws the rules state hold for reals
(`reassoc` would be unsound for truncating integer division; `verify` would say so).
"""
from __future__ import annotations

from eqdsl.languages.base import Leaf

SEMANTICS = {
    "num": float,
    "var": Leaf(lambda name: ()),
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "shl": lambda a, k: a * 2.0 ** k,
}
