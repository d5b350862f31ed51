"""What a reference-semantics table is made of (`SEMANTICS = {op: function or Leaf}`).

Contract: a function takes an operator's arguments in declared order (arrays or floats for
sort-typed ones, int / str / tuple for values) and returns an array, a float, or a tuple for
multi-output sorts; a `Leaf` marks an input operator whose value is drawn at random.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Leaf:
    """An input operator (`input`, `weight`, `var`): its value is drawn at random, once per
    distinct argument list, with the shape `shape(*args)` gives (() for a scalar)."""

    shape: Callable[..., tuple[int, ...]]


OpSemantics = Callable[..., Any] | Leaf
