"""What a reference-semantics table is made of (`SEMANTICS = {op: function or Leaf}`).

Contract: a function takes an operator's arguments in declared order (arrays or floats for
sort-typed ones, int / str / tuple for values) and returns an array, a float, or a tuple for
multi-output sorts; a `Leaf` marks an input operator whose value is drawn at random; an `External`
wraps one defined by another system.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Leaf:
    """An input operator (`input`, `weight`, `var`): its value is drawn at random, once per
    distinct argument list, with the shape `shape(*args)` gives (() for a scalar): normal floats,
    or `draw(rng, shape, *args)` where given (a leaf of another element type)."""

    shape: Callable[..., tuple[int, ...]]
    draw: Callable[..., Any] | None = None


@dataclass(frozen=True)
class External:
    """An operator whose meaning another system defines (an opaque ONNX operator): callable like
    any semantics function, but `eqdsl verify` does not check its shape rule on random examples
    (its arguments name the operator, so random ones mean nothing)."""

    fn: Callable[..., Any]
    defined_by: str

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


@dataclass(frozen=True, eq=False)
class Split:
    """A value of a two-field sort (`sort A { access: [Int], compute: [Int] }`): an array whose
    first `split` axes form the first field and the rest the second. Its shape, as the analysis
    stores it, is `[split] ++ array.shape`; NumPy sees the array (`np.asarray(v)`)."""

    array: np.ndarray
    split: int

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.array, dtype=dtype)


def value_shape(v: Any) -> tuple[int, ...]:
    """The shape a value's analysis describes: np.shape, or `[split] ++ shape` for a Split."""
    if isinstance(v, Split):
        return (v.split, *np.shape(v.array))
    return tuple(np.shape(v))


OpSemantics = Callable[..., Any] | Leaf
