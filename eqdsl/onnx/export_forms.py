"""How tensor-language operators are written as ONNX nodes: the export families the operator
table (`eqdsl.languages.tensor.ops`, column `onnx_out`) names.

Contract: `FAMILIES[family](op, **params)` returns an `Emit`: `emit(emitter, i, args)` appends the
ONNX nodes for program node i (tensor operands already ONNX value names in `args`, the rest as
the program holds them) to `emitter` and returns the name of the value holding its result.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, cast

import numpy as np
from onnx import helper

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.languages.tensor import opaque
from eqdsl.languages.tensor.codes import Act, Pad, same_padding
from eqdsl.languages.tensor.ops import fixed
from eqdsl.languages.tensor.reference import LOWEST, LRN_BETA, LRN_SIZE, lrn_band

if TYPE_CHECKING:
    from eqdsl.onnx.write import Emitter



Emit = Callable[["Emitter", int, list], str]


def _simple(op_type: str, attrs: tuple[tuple[str, Any], ...] = ()) -> Emit:
    return lambda e, i, a: e.node(op_type, a, f"t{i}", **dict(attrs))


def _lrn(e: Emitter, i: int, a: list) -> str:
    """One LRN node, its alpha and bias the attributes their constants hold; where one depends on
    the program's inputs, the same function as x times its factor (`_lrn_scale`)."""
    alpha, bias = _constant_scalar(e, i, 1), _constant_scalar(e, i, 2)
    if alpha is None or bias is None:
        return e.node("Mul", [a[0], _lrn_scale(e, i, a, f"t{i}_factor")], f"t{i}")
    return e.node("LRN", [a[0]], f"t{i}", size=LRN_SIZE, alpha=alpha, beta=LRN_BETA, bias=bias)


def _lrn_scale(e: Emitter, i: int, a: list, out: str = "") -> str:
    """LRN's factor as Mul (x²), a 1×1 Conv over a band of alpha / 5 (the window's sum, one GEMM),
    Add (bias), and b^-0.75 as 1 / (√b · √√b) (ONNX Runtime's Pow costs 3 ns an element, its Sqrt
    and Reciprocal a tenth of that): 6-10× faster than its LRN kernel."""
    assert LRN_BETA == 0.75  # the two square roots
    alpha = _constant_scalar(e, i, 1)
    band = (lrn_band(e.dims(i)[1]) * ((alpha if alpha is not None else 1.0) / LRN_SIZE)).astype(np.float32)
    band = band[:, :, None, None]
    window = e.node("Conv", [e.node("Mul", [a[0], a[0]], f"t{i}_squares"), e.constant(f"t{i}_band", band)],
                    f"t{i}_window")
    if alpha is None:
        window = e.node("Mul", [window, a[1]], f"t{i}_scaled")
    root = e.node("Sqrt", [e.node("Add", [window, a[2]], f"t{i}_base")], f"t{i}_root")
    power = e.node("Mul", [root, e.node("Sqrt", [root], f"t{i}_root4")], f"t{i}_power")  # base^0.75
    return e.node("Reciprocal", [power], out or f"t{i}")


def _constant_scalar(e: Emitter, i: int, arg: int) -> float | None:
    """The float32 value of node i's child at `arg` where it is a constant (folded by the
    emitter, as weights are), or None."""
    child = e.program.nodes[i].args[arg]
    if not isinstance(child, ir.Child) or child.index not in e.const:
        return None
    return float(np.float32(np.asarray(e.value(child.index)).reshape(())))


def _matmul(e: Emitter, i: int, a: list) -> str:
    act, x, w = a
    return e.activation(act, e.node("MatMul", [x, w], f"t{i}" if act == Act.NONE else f"t{i}_mm"), f"t{i}")


def _padding(e: Emitter, i: int, arg: int, pad: int, fill: int) -> tuple[str | None, dict[str, Any]]:
    """The operand at `arg` and the padding attributes of node i: a VALID node whose operand is a
    `pad2d` with `fill` takes that padding itself (ONNX's `pads`, as models are written: Conv(pads)
    rather than Pad + Conv); the Pad then left unused is dropped (`Emitter.used_nodes`). SAME is
    written as the explicit pads it means, as exporters write it. None for the operand: as emitted."""
    padded = _child(e, i, arg, "pad2d")
    node = e.program.nodes[padded] if padded is not None else None
    if pad == Pad.VALID and node is not None and node.args[5] == fill:
        x = node.args[0]
        assert isinstance(x, ir.Child)
        top, bottom, left, right = (int(cast(int, v)) for v in node.args[1:5])
        return e.operand(x.index), {"pads": [top, left, bottom, right]}
    return None, _explicit(e, i, arg, pad)


def _explicit(e: Emitter, i: int, arg: int, pad: int) -> dict[str, Any]:
    """SAME (or VALID) padding of node i as ONNX's `pads`: [top, left, bottom, right]."""
    if pad == Pad.VALID:
        return {}
    size = e.dims(i, arg)[2:]
    node = e.program.nodes[i]
    kernel = e.dims(i, 5)[2:] if node.op == "conv2d" else (node.args[1], node.args[2])
    strides = [int(cast(int, s)) for s in (node.args[:2] if node.op == "conv2d" else node.args[3:5])]
    (top, bottom), (left, right) = (same_padding(size[k], int(cast(int, kernel[k])), strides[k]) for k in range(2))
    return {"pads": [top, left, bottom, right]}


def _conv(e: Emitter, i: int, a: list) -> str:
    sh, sw, pad, act, x, w = a
    return _convolution(e, i, 4, x, w, (sh, sw), (1, 1), pad, act)


def _dilated_conv(e: Emitter, i: int, a: list) -> str:
    sh, sw, dh, dw, act, x, w = a
    return _convolution(e, i, 5, x, w, (sh, sw), (dh, dw), Pad.VALID, act)


def _convolution(e: Emitter, i: int, at: int, x: str, w: str, strides: tuple, dilations: tuple, pad: int,
                 act: int) -> str:
    """One Conv for node i, whose input `x` is its argument `at` and kernel `w` the next
    (`dilations` only where not 1, as exporters write it)."""
    xs, ws = e.dims(i, at), e.dims(i, at + 1)
    unpadded, padding = _padding(e, i, at, pad, 0)
    spread = {"dilations": list(dilations)} if dilations != (1, 1) else {}
    out = e.node("Conv", [unpadded or x, w], f"t{i}" if act == Act.NONE else f"t{i}_conv", strides=list(strides),
                 group=xs[1] // ws[1], kernel_shape=list(ws[2:]), **spread, **padding)
    return e.activation(act, out, f"t{i}")


def _pool(op_type: str) -> Emit:
    def emit(e: Emitter, i: int, a: list) -> str:
        x, kh, kw, sh, sw, pad, act = a
        name = f"t{i}" if act == Act.NONE else f"t{i}_pool"
        if pad == Pad.VALID and tuple(e.dims(i, 0)[2:]) == (kh, kw) and (sh, sw) == (1, 1):  # as imported
            return e.activation(act, e.node(GLOBAL[op_type], [x], name), f"t{i}")
        extra = {"count_include_pad": 0} if op_type == "AveragePool" else {}
        unpadded, padding = _padding(e, i, 0, pad, 1) if op_type == "MaxPool" else (None, _explicit(e, i, 0, pad))
        out = e.node(op_type, [unpadded or x], name, kernel_shape=[kh, kw], strides=[sh, sw], **padding, **extra)
        return e.activation(act, out, f"t{i}")
    return emit


GLOBAL = {"AveragePool": "GlobalAveragePool", "MaxPool": "GlobalMaxPool"}


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
    matmul = _nd_matmul(e, i)
    if matmul is not None:
        return matmul
    dims = e.constant(f"shape_{i}", np.array(a[1], dtype=np.int64))
    return e.node("Reshape", [a[0], dims], f"t{i}")


def _nd_matmul(e: Emitter, i: int) -> str | None:
    """Node i as the N-D MatMul that the import flattened (rows of any rank times a matrix become
    `reshape(matmul(act, reshape(x, [rows, K]), w), dims)`), or None. Written back as one MatMul,
    as exporters write it: ONNX Runtime fuses MatMul + Add into Gemm only with no Reshape between
    (ConvNeXt-Tiny's 36 blocks: 0.974× as flattened). The flattening nodes are left unused."""
    mm = _child(e, i, 0, "matmul")
    flat = _child(e, mm, 1, "reshape") if mm is not None else None
    if mm is None or flat is None:
        return None
    rows = e.dims(flat, 0)
    if (len(rows) <= 2 or tuple(e.dims(flat)) != (int(np.prod(rows[:-1])), rows[-1])
            or tuple(e.dims(i)) != tuple(rows[:-1]) + tuple(e.dims(mm)[-1:])):
        return None
    x, w = e.program.nodes[flat].args[0], e.program.nodes[mm].args[2]
    assert isinstance(x, ir.Child) and isinstance(w, ir.Child)
    act = int(cast(int, e.program.nodes[mm].args[0]))
    out = e.node("MatMul", [e.operand(x.index), e.operand(w.index)], f"t{i}" if act == Act.NONE else f"t{i}_mm")
    return e.activation(act, out, f"t{i}")


def _child(e: Emitter, i: int, arg: int, op: str) -> int | None:
    """The index of node i's child at `arg` when it is an `op` node."""
    child = e.program.nodes[i].args[arg]
    if isinstance(child, ir.Child) and e.program.nodes[child.index].op == op:
        return child.index
    return None


def _pad(e: Emitter, i: int, a: list) -> str:
    x, top, bottom, left, right, fill = a
    pads = e.constant(f"pads_{i}", np.array([0, 0, top, left, 0, 0, bottom, right], dtype=np.int64))
    value = e.constant(f"fill_{fill}", np.array(LOWEST if fill else 0.0, dtype=np.float32))
    return e.node("Pad", [x, pads, value], f"t{i}", mode="constant")


def _opaque(e: Emitter, i: int, a: list) -> str:
    """As imported: constants of the key's input layout become initializers, omitted inputs stay
    omitted; the opset of its semantics (`opaque.OPSET`) sets the model's (`Emitter.opset`). The
    outputs of one multi-output operator (`opaque.OUTPUT`) over the same operands are one node.
    A value a branch reads from the enclosing graph (`opaque.CAPTURES`) is given its name there."""
    op_type, domain, attrs = opaque.decode(a[0])
    captured = opaque.captures(attrs)
    own = a[2:len(a) - len(captured)]
    items = opaque.layout(attrs, len(own))
    e.require(int(cast(int, attrs.get(opaque.OPSET, opaque.DEFAULT_OPSET))))
    k, n = opaque.output_of(attrs)
    for name, value in zip(captured, a[len(a) - len(captured):]):
        _capture(e, name, value)
    tensors = iter(own)
    inputs = [next(tensors) if item == "t" else "" if item == "" else e.constant(f"c{i}_{j}", opaque.constant(item))
              for j, item in enumerate(items)]
    if n == 1:
        return e.node(op_type, inputs, f"t{i}", domain=domain or None, **opaque.node_attributes(attrs))
    shared = (opaque.encode(op_type, domain, {k: v for k, v in attrs.items() if k != opaque.OUTPUT}), tuple(a[2:]))
    if shared not in e.shared:
        e.shared[shared] = helper.make_node(op_type, inputs, [f"t{i}_{j}" for j in range(n)], name=f"n{len(e.nodes)}",
                                            domain=domain or None, **opaque.node_attributes(attrs))
        e.nodes.append(e.shared[shared])
    return e.shared[shared].output[k]


def _capture(e: Emitter, name: str, value: str) -> None:
    """`name`, which a branch reads, as a copy of `value` (unless it is `value`)."""
    if name == value or e.captured.get(name) == value:
        return
    if name in e.captured:
        raise EqdslError.one(f"export onnx: two values for {name!r}, which a branch of an opaque operator reads")
    e.captured[name] = value
    e.nodes.append(helper.make_node("Identity", [value], [name], name=f"n{len(e.nodes)}"))


FAMILIES: dict[str, Callable[..., Emit]] = {
    "simple": lambda op, onnx_type, attrs=(): _simple(onnx_type, attrs), "lrn": fixed(_lrn),
    "lrn_scale": fixed(_lrn_scale), "product": fixed(_matmul), "conv": fixed(_conv),
    "dilated_conv": fixed(_dilated_conv),
    "pool": lambda op, onnx_type: _pool(onnx_type),
    "permute": fixed(lambda e, i, a: e.node("Transpose", [a[0]], f"t{i}", perm=list(a[1]))),
    "join": fixed(_concat), "cut": fixed(_split), "part": lambda op, k: _part(k), "view": fixed(_reshape),
    "normalize": fixed(lambda e, i, a: e.node("BatchNormalization", a, f"t{i}", epsilon=1e-5)),
    "alias": fixed(lambda e, i, a: a[0]), "pad": fixed(_pad), "opaque": fixed(_opaque),
}
