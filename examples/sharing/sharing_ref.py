"""Reference semantics of examples/sharing/sharing.eqr (found by `eqdsl verify` and validation
because it sits beside the .eqr file as `<name>_ref.py`)."""
import numpy as np

from eqdsl.languages.base import Leaf

SEMANTICS = {
    "input": Leaf(lambda name, rows, cols: (rows, cols)),
    "weight": Leaf(lambda name, rows, cols: (rows, cols)),
    "matmul": lambda a, b: a @ b,
    "concat": lambda a, b: np.concatenate([a, b], axis=1),
    "cols-before": lambda at, x: x[:, :at],
    "cols-from": lambda at, x: x[:, at:],
}
