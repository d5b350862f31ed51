"""Output sizes and padding shared by every kernel backend (TASO's / TensorFlow's conventions)."""
from __future__ import annotations


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int, int]:
    """TensorFlow's SAME: (output size, padding before, padding after); the extra goes after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return out, total // 2, total - total // 2


def spatial(size: int, kernel: int, stride: int, pad: int) -> tuple[int, int]:
    """(output size, padding before) along one axis for pad 0 SAME, 1 VALID."""
    if pad == 0:
        out, before, _ = same_padding(size, kernel, stride)
        return out, before
    return (size - kernel) // stride + 1, 0


class Unsupported(ValueError):
    """A kernel cannot run these arguments (callers fall back to another implementation)."""
