"""How tensor-language operators are written as ONNX nodes: the export families the operator
table (`eqdsl.languages.tensor.ops`, column `onnx_out`) names.

Contract: `FAMILIES[family](op, *params)` returns an `Emit`: `emit(emitter, i, args)` appends the
ONNX nodes for program node i (tensor operands already ONNX value names in `args`, the rest as
the program holds them) to `emitter` and returns the name of the value holding its result.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, cast

import numpy as np
from onnx import helper

from eqdsl.languages.tensor import opaque
from eqdsl.languages.tensor.ops import fixed
from eqdsl.languages.tensor.reference import LOWEST

if TYPE_CHECKING:
    from eqdsl.onnx.write import Emitter

AUTO_PAD = {0: "SAME_UPPER", 1: "VALID"}  # SAME is TensorFlow's: the extra row goes at the end


Emit = Callable[["Emitter", int, list], str]


def _simple(op_type: str) -> Emit:
    return lambda e, i, a: e.node(op_type, a, f"t{i}")


def _matmul(e: Emitter, i: int, a: list) -> str:
    act, x, w = a
    return e.activation(act, e.node("MatMul", [x, w], f"t{i}" if act == 0 else f"t{i}_mm"), f"t{i}")


def _conv(e: Emitter, i: int, a: list) -> str:
    sh, sw, pad, act, x, w = a
    xs, ws = e.dims(i, 4), e.dims(i, 5)
    out = e.node("Conv", [x, w], f"t{i}" if act == 0 else f"t{i}_conv", strides=[sh, sw],
                 auto_pad=AUTO_PAD[pad], group=xs[1] // ws[1], kernel_shape=list(ws[2:]))
    return e.activation(act, out, f"t{i}")


def _pool(op_type: str) -> Emit:
    def emit(e: Emitter, i: int, a: list) -> str:
        x, kh, kw, sh, sw, pad, act = a
        extra = {"count_include_pad": 0} if op_type == "AveragePool" else {}
        out = e.node(op_type, [x], f"t{i}" if act == 0 else f"t{i}_pool", kernel_shape=[kh, kw],
                     strides=[sh, sw], auto_pad=AUTO_PAD[pad], **extra)
        return e.activation(act, out, f"t{i}")
    return emit


def _concat(e: Emitter, i: int, a: list) -> str:
    return e.node("Concat", a[1:], f"t{i}", axis=a[0])


def _split(e: Emitter, i: int, a: list) -> str:
    axis, at, x = a
    sizes = e.constant(f"split_{i}", np.array([at, e.dims(i, 2)[axis] - at], dtype=np.int64))
    e.nodes.append(helper.make_node("Split", [x, sizes], [f"t{i}_0", f"t{i}_1"], name=f"n{len(e.nodes)}",
                                    axis=axis))
    return f"t{i}"


def _part(k: int) -> Emit:
    return lambda e, i, a: f"{a[0]}_{k}"


def _reshape(e: Emitter, i: int, a: list) -> str:
    dims = e.constant(f"shape_{i}", np.array(a[1], dtype=np.int64))
    return e.node("Reshape", [a[0], dims], f"t{i}")


def _pad(e: Emitter, i: int, a: list) -> str:
    x, top, bottom, left, right, fill = a
    pads = e.constant(f"pads_{i}", np.array([0, 0, top, left, 0, 0, bottom, right], dtype=np.int64))
    value = e.constant(f"fill_{fill}", np.array(LOWEST if fill else 0.0, dtype=np.float32))
    return e.node("Pad", [x, pads, value], f"t{i}", mode="constant")


def _opaque(e: Emitter, i: int, a: list) -> str:
    op_type, domain, attrs = opaque.decode(a[0])
    e.nodes.append(helper.make_node(op_type, a[2:], [f"t{i}"], name=f"n{len(e.nodes)}",
                                    domain=domain or None, **cast(dict[str, Any], attrs)))
    return f"t{i}"




FAMILIES: dict[str, Callable[..., Emit]] = {
    "simple": lambda op, op_type: _simple(op_type), "matmul": fixed(_matmul), "conv": fixed(_conv),
    "pool": lambda op, op_type: _pool(op_type),
    "transpose": fixed(lambda e, i, a: e.node("Transpose", [a[0]], f"t{i}", perm=list(a[1]))),
    "concat": fixed(_concat), "split": fixed(_split), "part": lambda op, k: _part(k), "reshape": fixed(_reshape),
    "batchnorm": fixed(lambda e, i, a: e.node("BatchNormalization", a, f"t{i}", epsilon=1e-5)),
    "alias": fixed(lambda e, i, a: a[0]), "pad": fixed(_pad), "opaque": fixed(_opaque),
}
