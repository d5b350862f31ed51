"""Reference semantics of `qgym` (rulesets/qgym.eqr) over exact integers.

The layer's activations and weights are integers (quantized levels); the laws the rules state
(commutativity, associativity, distributivity) hold for any ring, so `verify` checks them on
random reals like every other language, and `eqdsl.apps.qgym.runners` checks extracted layers exactly
on random integers.
"""
from __future__ import annotations

import numpy as np

from eqdsl.languages.base import Leaf

SEMANTICS = {
    "x": Leaf(lambda r, s, c: ()),
    "leaf": Leaf(lambda name: ()),
    "w": np.int64,
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
}
