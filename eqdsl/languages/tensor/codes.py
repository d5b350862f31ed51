"""The tensor language's integer codes and the padding arithmetic every part shares (TASO's and
TENSAT's conventions): a fused activation `Act`, a padding mode `Pad`, TensorFlow's SAME padding.

Codes are `IntEnum`s: they are the `Int` parameters the `.eqr` operators take (`conv2d(1, 1,
Pad.SAME, Act.RELU, x, w)` is `conv2d(1, 1, 0, 2, ...)`), and compare equal to those integers.
"""
from __future__ import annotations

from enum import IntEnum


class Act(IntEnum):
    NONE = 0
    SIGMOID = 1
    RELU = 2
    TANH = 3


class Pad(IntEnum):
    SAME = 0  # TensorFlow's: the output is ceil(size / stride); the extra row/column goes after
    VALID = 1  # no padding


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """SAME padding along one axis: (before, after)."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def spatial(size: int, kernel: int, stride: int, pad: int) -> tuple[int, int]:
    """(output size, padding before) along one axis under padding mode `pad`."""
    if pad == Pad.SAME:
        return -(-size // stride), same_padding(size, kernel, stride)[0]
    return (size - kernel) // stride + 1, 0
