"""How ONNX operators become tensor-language terms: the import families the operator table
(`eqdsl.languages.tensor.ops`, column `onnx_in`) names.

Contract: `FAMILIES[family](op, **params)` returns a `Handler`: `handler(reader, node, attrs)` gives
one value per node output (a program `Tensor`, or a NumPy constant not yet used as a tensor), or
raises `NodeError` for what it cannot import exactly. A binary operator whose operands do not
broadcast the language's way becomes an opaque node (`opaque_of`), exactly as written.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import onnx

from eqdsl.ir.builder import Tensor
from eqdsl.ir.builtins import broadcasts
from eqdsl.languages.tensor.codes import Pad, same_padding
from eqdsl.languages.tensor.ops import fixed
from eqdsl.languages.tensor.reference import LRN_BETA, LRN_SIZE
from eqdsl.onnx.opaque_nodes import opaque_of
from eqdsl.onnx.reader import NodeError, Reader, Value, rational, tensor_array

SAME, VALID = int(Pad.SAME), int(Pad.VALID)  # plain ints: the values programs hold


Handler = Callable[[Reader, onnx.NodeProto, dict[str, Any]], list[Value]]


def _padding(node: onnx.NodeProto, attrs: dict, x: tuple[int, ...], kernel: list[int],
             strides: list[int]) -> tuple[int, tuple[int, int, int, int]]:
    """(SAME or VALID, extra (top, bottom, left, right) zero padding to apply first)."""
    if any(d != 1 for d in attrs.get("dilations", [1, 1])):
        raise NodeError(f"attribute dilations={list(attrs['dilations'])}: only 1 is supported")
    same = [same_padding(x[2 + k], kernel[k], strides[k]) for k in range(2)]
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "VALID"):
        return (SAME if auto == "SAME_UPPER" else VALID), (0, 0, 0, 0)
    if auto == "SAME_LOWER":
        pads = [same[0][1], same[1][1], same[0][0], same[1][0]]
    else:
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
    top, left, bottom, right = pads
    if ((top, bottom), (left, right)) == (same[0], same[1]) and ("pads" in attrs or auto == "SAME_LOWER"):
        return SAME, (0, 0, 0, 0)  # no `pads` at all reads as VALID, so a 1×1 VALID Conv round-trips
    return VALID, (top, bottom, left, right)


def _spatial(node: onnx.NodeProto, attrs: dict, x: tuple[int, ...], kernel: list[int]):
    if len(x) != 4 or len(kernel) != 2:
        raise NodeError(f"expected a 2-D (NCHW) {node.op_type}, got a {len(x) - 2}-D one")
    strides = list(attrs.get("strides", [1, 1]))
    return strides, *_padding(node, attrs, x, kernel, strides)


def _padded(r: Reader, x: Tensor, extra: tuple[int, int, int, int], fill: int) -> Tensor:
    return x if not any(extra) else r.g.pad2d(x, *extra, fill)


def _conv(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    x, w = r.tensor(node.input[0]), r.tensor(node.input[1])
    if len(x.dims) == 3 and len(w.dims) == 3:  # 1-D: the 2-D convolution over a height of 1, reshaped
        (n, c, length), (out, per_group, k) = x.dims, w.dims
        y = _conv2d(r, node, _as_2d(attrs), r.g.reshape(x, [n, c, 1, length]), r.g.reshape(w, [out, per_group, 1, k]))
        return [r.g.reshape(y, [y.dims[0], y.dims[1], y.dims[3]])]
    return [_conv2d(r, node, attrs, x, w)]


def _as_2d(attrs: dict) -> dict:
    """A 1-D Conv's attributes for the 2-D one over a height of 1 (ONNX pads: begins, then ends)."""
    two = dict(attrs)
    for key, one in (("strides", 1), ("dilations", 1), ("kernel_shape", 1)):
        if key in attrs:
            two[key] = [one, *attrs[key]]
    if "pads" in attrs:
        begin, end = attrs["pads"]
        two["pads"] = [0, begin, 0, end]
    return two


def _conv2d(r: Reader, node: onnx.NodeProto, attrs: dict, x: Tensor, w: Tensor) -> Tensor:
    dilations = list(attrs.get("dilations", [1, 1]))
    if dilations != [1, 1]:
        y = _dilated(r, node, attrs, x, w, dilations)
    else:
        strides, pad, extra = _spatial(node, attrs, x.dims, list(w.dims[2:]))
        y = r.g.conv2d(strides[0], strides[1], pad, 0, _padded(r, x, extra, 0), w)
    if len(node.input) > 2 and node.input[2]:
        channels = y.dims[1]
        y = r.g.ewadd(y, r.g.reshape(r.tensor(node.input[2]), [1, channels, 1, 1]))
    return y


def _dilated(r: Reader, node: onnx.NodeProto, attrs: dict, x: Tensor, w: Tensor, dilations: list[int]) -> Tensor:
    """`dconv2d` over the input padded explicitly (its SAME padding is the span's, (k - 1) * d + 1)."""
    spans = [(k - 1) * d + 1 for k, d in zip(w.dims[2:], dilations)]
    undilated = {k: v for k, v in attrs.items() if k != "dilations"}
    strides, pad, extra = _spatial(node, undilated, x.dims, spans)
    if pad == SAME:
        extra = _explicit_same(x.dims, spans, strides)
    return r.g.op("dconv2d", strides[0], strides[1], *dilations, 0, _padded(r, x, extra, 0), w)


def _pool(kind: str) -> Handler:
    def handle(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
        if attrs.get("ceil_mode", 0):
            raise NodeError("attribute ceil_mode=1 is not supported")
        x = r.tensor(node.input[0])
        kernel = list(attrs["kernel_shape"])
        strides, pad, extra = _spatial(node, attrs, x.dims, kernel)
        if kind == "max":
            return [r.g.poolmax(_padded(r, x, extra, 1), *kernel, *strides, pad, 0)]
        include = attrs.get("count_include_pad", 0)
        if include and (pad == SAME and any(same_padding(x.dims[2 + k], kernel[k], strides[k]) != (0, 0)
                                             for k in range(2))):
            pad, extra = VALID, _explicit_same(x.dims, kernel, strides)
        if any(extra) and not include:
            raise NodeError("padding that is not SAME with count_include_pad=0 is not supported")
        return [r.g.poolavg(_padded(r, x, extra, 0), *kernel, *strides, pad, 0)]
    return handle


def _explicit_same(x: tuple[int, ...], kernel: list[int], strides: list[int]) -> tuple[int, int, int, int]:
    (t, b), (left, right) = (same_padding(x[2 + k], kernel[k], strides[k]) for k in range(2))
    return t, b, left, right


def _global_pool(kind: str) -> Handler:
    def handle(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
        x = r.tensor(node.input[0])
        if len(x.dims) != 4:
            raise NodeError(f"expected an NCHW input, got shape {list(x.dims)}")
        return [r.g.op(f"pool{kind}", x, x.dims[2], x.dims[3], 1, 1, VALID, 0)]
    return handle


def _gemm(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    for key in ("alpha", "beta"):
        if attrs.get(key, 1.0) != 1.0:
            raise NodeError(f"attribute {key}={attrs[key]}: only 1.0 is supported")
    a, b = r.tensor(node.input[0]), r.tensor(node.input[1])
    a = r.g.transpose(a, [1, 0]) if attrs.get("transA", 0) else a
    b = r.g.transpose(b, [1, 0]) if attrs.get("transB", 0) else b
    y = r.g.matmul(0, a, b)
    if len(node.input) > 2 and node.input[2]:
        bias = r.tensor(node.input[2])
        y = _broadcast(r, "ewadd", y, bias) or opaque_of(r, node, [y, bias], as_op="Add")
    return [y]


def _broadcast(r: Reader, op: str, a: Tensor, b: Tensor) -> Tensor | None:
    """op(a, b) when one operand broadcasts to the other (the language broadcasts its second)."""
    if broadcasts(b.dims, a.dims):
        return r.g.op(op, a, b)
    if broadcasts(a.dims, b.dims):
        return r.g.op(op, b, a)
    return None


def _commutative(op: str) -> Handler:
    """Add, Mul: either operand may be the one that broadcasts."""
    def handle(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
        a, b = r.operand(node.input[0], node.input[1]), r.operand(node.input[1], node.input[0])
        y = _broadcast(r, op, a, b)
        return [y if y is not None else opaque_of(r, node, [a, b])]
    return handle


def _variadic(op: str) -> Handler:
    """Sum (and the like): n inputs folded left to right with the binary `op`, each step's
    operands broadcast as Add's; one input is itself. Opaque where a step does not broadcast."""
    def handle(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
        names = [n for n in node.input if n]
        y = r.tensor(names[0])
        for name in names[1:]:
            step = _broadcast(r, op, y, r.operand(name, names[0]))
            if step is None:
                return [opaque_of(r, node)]
            y = step
        return [y]
    return handle


def _sub(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    a, b = r.tensor(node.input[0]), r.tensor(node.input[1])
    if not broadcasts(b.dims, a.dims):
        return [opaque_of(r, node, [a, b])]
    minus = r.g.smul(b, r.derived("eqdsl.minus_one", np.array([-1.0], dtype=np.float32)))
    return [r.g.ewadd(a, minus)]


def _div(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    a, divisor = r.tensor(node.input[0]), r.env.get(node.input[1])
    exact = r.scalar_of(node.input[1], len(a.dims))
    if exact is not None and exact[0] != 0:
        num, den = exact
        return [r.g.ewmul(a, r.g.op("scalar", den * (1 if num > 0 else -1), abs(num)))]
    if isinstance(divisor, np.ndarray) and divisor.dtype == np.float32 and broadcasts(divisor.shape, a.dims):
        return [r.g.ewmul(a, r.derived(f"{node.input[1]}.reciprocal", 1.0 / divisor))]
    return [opaque_of(r, node, [a, r.tensor(node.input[1])])]


def _clip(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    inputs = [r.tensor(n) if n else None for n in node.input]
    x, lo, hi = (inputs + [None, None])[:3]
    if lo is None or hi is None or lo.dims or hi.dims:  # an unbounded side, or bounds not 0-d (ONNX: scalars)
        return [opaque_of(r, node)]
    assert x is not None
    return [r.g.op("clip", x, lo, hi)]


def _matmul(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    a, b = r.tensor(node.input[0]), r.tensor(node.input[1])
    sa, sb = list(a.dims), list(b.dims)
    if len(sa) == len(sb) >= 2 and sa[:-2] == sb[:-2]:
        return [r.g.matmul(0, a, b)]
    if len(sa) > 2 and len(sb) == 2:  # rows of any rank times a matrix: flatten the rows
        rows = r.g.matmul(0, r.g.reshape(a, [int(np.prod(sa[:-1])), sa[-1]]), b)
        return [r.g.reshape(rows, sa[:-1] + [sb[-1]])]
    return [opaque_of(r, node, [a, b])]


def _activation(op: str) -> Handler:
    return lambda r, node, attrs: [r.g.op(op, r.tensor(node.input[0]))]


def _lrn(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    """An LRN of size 5 and beta 0.75 (ONNX's default); its alpha and bias (by default 1e-4 and 1)
    the exact scalars their float32 values are."""
    if attrs.get("size") != LRN_SIZE or attrs.get("beta", LRN_BETA) != LRN_BETA:
        raise NodeError(f"size {attrs.get('size')}, beta {attrs.get('beta', LRN_BETA)}: the language's lrn has "
                        f"size {LRN_SIZE}, beta {LRN_BETA}")
    alpha, bias = (rational(np.asarray(attrs.get(key, default), np.float32)) for key, default in (("alpha", 1e-4),
                                                                                                  ("bias", 1.0)))
    if alpha is None or bias is None:
        raise NodeError(f"alpha {attrs.get('alpha')}, bias {attrs.get('bias')}: expected finite numbers")
    return [r.g.op("lrn", r.tensor(node.input[0]), r.g.op("scalar", *alpha), r.g.op("scalar", *bias))]


def _plain(op: str, attrs: tuple[tuple[str, Any], ...] = ()) -> Handler:
    """A node whose inputs are `op`'s tensor arguments in order and whose attributes its semantics
    fix (`fixed_attrs`, name and value; ONNX's defaults as a rule): another value keeps the node
    opaque (NodeError). The form of an operator that is ONNX's own (`LayerNormalization`)."""
    fixed_values = dict(attrs)

    def handle(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
        for key, value in attrs.items():
            if key not in fixed_values or not _same(value, fixed_values[key]):
                want = f"{fixed_values[key]!r}" if key in fixed_values else "absent"
                raise NodeError(f"attribute {key}={value!r}: {op} takes it {want}")
        return [r.g.op(op, *(r.tensor(n) for n in node.input))]
    return handle


def _same(value: Any, fixed_value: Any) -> bool:
    """Equal, a float attribute (stored as float32) within float32's rounding."""
    if isinstance(value, float) and isinstance(fixed_value, float):
        return abs(value - fixed_value) <= 1e-6 * abs(fixed_value)
    return bool(value == fixed_value)


def _alias(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    if node.op_type == "Dropout" and len(node.output) > 1 and r.used(node.output[1]):
        raise NodeError("Dropout's mask output is used; only inference (no mask) is supported")
    return [r.env[node.input[0]]]


def _axis(node: onnx.NodeProto, attrs: dict, rank: int, default: int | None = None) -> int:
    axis = attrs.get("axis", default)
    if axis is None or not -rank <= axis < rank:
        raise NodeError(f"attribute axis={axis} is out of range for rank {rank}")
    return axis % rank


def _concat(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    parts = [r.tensor(n) for n in node.input]
    axis = _axis(node, attrs, len(parts[0].dims))
    while len(parts) > 5:
        parts = [r.g.concat5(axis, *parts[:5])] + parts[5:]
    if len(parts) == 1:
        return [parts[0]]
    return [r.g.op({2: "concat", 3: "concat3", 4: "concat4", 5: "concat5"}[len(parts)], axis, *parts)]


def _split(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    x = r.tensor(node.input[0])
    axis = _axis(node, attrs, len(x.dims), 0)
    length = x.dims[axis]
    if len(node.input) > 1 and node.input[1]:
        sizes = [int(v) for v in r.const(node.input[1], "Split's sizes")]
    else:
        count = attrs.get("num_outputs", len(node.output))
        step = -(-length // count)
        sizes = [min(step, length - k * step) for k in range(count)]
    parts: list[Value] = []
    for size in sizes[:-1]:
        pair = r.g.split(axis, size, x)
        parts.append(r.g.split0(pair))
        x = r.g.split1(pair)
    return parts + [x]


def _reshape(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    x = r.tensor(node.input[0])
    dims = [int(v) for v in r.const(node.input[1], "Reshape's shape")]
    if attrs.get("allowzero", 0) and 0 in dims:
        raise NodeError("allowzero=1 with a 0 dimension is not supported")
    dims = [x.dims[k] if d == 0 else d for k, d in enumerate(dims)]
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1]))
        dims[dims.index(-1)] = int(np.prod(x.dims)) // max(known, 1)
    return [r.g.reshape(x, dims)]


def _flatten(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    x = r.tensor(node.input[0])
    shape = list(x.dims)
    axis = attrs.get("axis", 1) % (len(shape) + 1) if shape else 0
    return [r.g.reshape(x, [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))])]


def _transpose(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    x = r.tensor(node.input[0])
    perm = list(attrs.get("perm", range(len(x.dims) - 1, -1, -1)))
    return [r.g.transpose(x, perm)]


def _batchnorm(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    if attrs.get("training_mode", 0):
        raise NodeError("attribute training_mode=1 is not supported (inference only)")
    x = r.tensor(node.input[0])
    if len(x.dims) != 4:
        raise NodeError(f"expected an NCHW input, got shape {list(x.dims)}")
    scale, bias, mean = (r.tensor(n) for n in node.input[1:4])
    eps = float(attrs.get("epsilon", 1e-5))
    if abs(eps - 1e-5) <= 1e-12:
        var = r.tensor(node.input[4])
    else:  # the language's batch norm uses ε = 1e-5: move the difference into the variance
        var = r.derived(f"{node.input[4]}.eps", r.const(node.input[4], f"the variance (epsilon={eps})")
                        + np.float32(eps - 1e-5))
    return [r.g.batchnorm(x, scale, bias, mean, var)]


def _constant(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    if "value" not in attrs:
        raise NodeError("only Constant nodes with a `value` tensor are supported")
    return [tensor_array(attrs["value"], "Constant value")]





FAMILIES: dict[str, Callable[..., Handler]] = {
    "conv": fixed(_conv), "gemm": fixed(_gemm), "product": fixed(_matmul),
    "commutative": _commutative, "variadic": _variadic, "sub": fixed(_sub), "div": fixed(_div), "unary": _activation,
    "pool": lambda op, kind: _pool(kind), "global_pool": lambda op, kind: _global_pool(kind),
    "join": fixed(_concat), "cut": fixed(_split), "view": fixed(_reshape), "flatten": fixed(_flatten),
    "permute": fixed(_transpose), "normalize": fixed(_batchnorm), "alias": fixed(_alias),
    "constant": fixed(_constant), "clamp": fixed(_clip), "plain": _plain, "lrn": fixed(_lrn),
}
