"""Reference semantics of mats.eqr: found by `eqdsl verify` and validation because it sits beside
the .eqr file, named after it (`mats.eqr` → `mats_ref.py`)."""
import numpy as np

from eqdsl.languages.base import Leaf

SEMANTICS = {
    "input": Leaf(lambda name, rows, cols: (rows, cols)),  # a leaf: drawn at random, of this shape
    "matmul": lambda a, b: a @ b,
    "add": lambda a, b: a + b,
    "concat": lambda a, b: np.concatenate([a, b], axis=1),
    "cols-before": lambda at, x: x[:, :at],
    "cols-from": lambda at, x: x[:, at:],
}
