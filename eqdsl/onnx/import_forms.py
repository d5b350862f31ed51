"""How ONNX operators become tensor-language terms: the import families the operator table
(`eqdsl.languages.tensor.ops`, column `onnx_in`) names.

Contract: `FAMILIES[family](op, *params)` returns a `Handler`: `handler(reader, node, attrs)` gives
one value per node output (a program `Tensor`, or a NumPy constant not yet used as a tensor), or
raises `NodeError` for what it cannot import exactly. A binary operator whose operands do not
broadcast the language's way becomes an opaque node (`opaque_of`), exactly as written.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable, cast

import numpy as np
import onnx
from onnx import helper, numpy_helper

from eqdsl import ir
from eqdsl.ir.builder import GraphBuilder, Tensor
from eqdsl.ir.builtins import broadcasts
from eqdsl.languages.tensor import opaque
from eqdsl.languages.tensor.ops import fixed
from eqdsl.languages.tensor.reference import same_padding
from eqdsl.onnx.weights import Weights

SAME, VALID = 0, 1


class NodeError(Exception):
    """A node we cannot import; becomes an `EqdslError` naming the node."""


Value = Tensor | np.ndarray  # a program tensor, or a constant the import has not yet made a weight


def _value_infos(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """Every typed value of `graph` and of the graphs nested in its nodes (If's branches, Loop's
    body), which shape inference annotates in place."""
    infos = list(graph.value_info) + list(graph.output) + list(graph.input)
    for node in graph.node:
        for sub in _subgraphs(node):
            infos += _value_infos(sub)
    return infos


def _inferred_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...] | None]:
    shapes: dict[str, tuple[int, ...] | None] = {}
    for info in _value_infos(model.graph):
        t = info.type.tensor_type
        if not t.HasField("shape"):
            shapes.setdefault(info.name, None)
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        shapes[info.name] = None if any(d is None for d in dims) else tuple(int(d or 0) for d in dims)
    return shapes


def _all_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    return [n for node in graph.node for n in [node, *(m for g in _subgraphs(node) for m in _all_nodes(g))]]


def _subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    return [g for a in node.attribute for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs))]


def read_names(node: onnx.NodeProto) -> set[str]:
    """The values `node` reads: its inputs, and for a node with branches (If, Loop) every name its
    branches read (those from the enclosing graph among them)."""
    names = {n for n in node.input if n}
    for g in _subgraphs(node):
        names |= {o.name for o in g.output} | {n for sub in g.node for n in read_names(sub)}
    return names


def default_opset(model: onnx.ModelProto) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def _inferred_types(model: onnx.ModelProto) -> dict[str, int]:
    return {info.name: info.type.tensor_type.elem_type for info in _value_infos(model.graph)
            if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type}


class Reader:
    def __init__(self, lang: ir.Language, model: onnx.ModelProto) -> None:
        self.g = GraphBuilder(lang)
        self.model = model
        self.env: dict[str, Value] = {}
        self.weights: Weights = {}
        self.shapes = _inferred_shapes(model)
        self.types = _inferred_types(model)
        self.opaque_notes: dict[tuple[str, str], int] = {}  # (op type, why the language's form did not fit) → nodes
        self.opset = default_opset(model) or 13
        self.read = {name for node in _all_nodes(model.graph) for name in read_names(node)} | \
            {o.name for o in model.graph.output}

    def dtype(self, name: str) -> np.dtype:
        """The element type of value `name` (a constant's own; else ONNX's inferred type; float32
        where inference gave none)."""
        value = self.env.get(name)
        if isinstance(value, np.ndarray):
            return value.dtype
        return helper.tensor_dtype_to_np_dtype(self.types.get(name, onnx.TensorProto.FLOAT))

    def tensor(self, name: str) -> Tensor:
        """The input `name` as a program tensor (a constant becomes a `weight` leaf)."""
        value = self.env.get(name)
        if value is None:
            raise NodeError(f"input {name!r} is not produced by any earlier node")
        if isinstance(value, Tensor):
            return value
        if value.dtype != np.float32:
            raise NodeError(f"constant {name!r}: expected float32 where a tensor is used, "
                            f"found a {value.dtype} constant")
        exact = rational(value) if value.shape == () else None
        if exact is not None:  # a scalar rules can match (`scalar(3, 1)`), not an anonymous weight
            return self.g.op("scalar", *exact)
        self.weights[name] = value
        return self.g.weight(name, list(value.shape))

    def const(self, name: str, what: str) -> np.ndarray:
        value = self.env.get(name)
        if not isinstance(value, np.ndarray):
            raise NodeError(f"{what} ({name!r}) must be a constant (an initializer or Constant node)")
        return value

    def derived(self, name: str, value: np.ndarray) -> Tensor:
        self.weights[name] = value.astype(np.float32)
        return self.g.weight(name, list(value.shape))


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
    strides, pad, extra = _spatial(node, attrs, x.dims, list(w.dims[2:]))
    y = r.g.conv2d(strides[0], strides[1], pad, 0, _padded(r, x, extra, 0), w)
    if len(node.input) > 2 and node.input[2]:
        channels = y.dims[1]
        y = r.g.ewadd(y, r.g.reshape(r.tensor(node.input[2]), [1, channels, 1, 1]))
    return [y]


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


def opaque_of(r: Reader, node: onnx.NodeProto, inputs: list[Tensor] | None = None, as_op: str | None = None) -> Tensor:
    """`node` (one output) as an opaque operator (or, with `as_op`, that attribute-less operator)
    over `inputs`, or over the node's own inputs (`opaque_outputs`)."""
    if inputs is None:
        outputs = opaque_outputs(r, node)
        if len(outputs) != 1 or outputs[0] is None:
            raise NodeError(f"{node.op_type} with {len(node.output)} outputs: expected one")
        return outputs[0]
    attrs = {} if as_op else {a.name: _attr_value(node, a) for a in node.attribute}
    key = opaque.encode(as_op or node.op_type, "" if as_op else node.domain, _opset_attrs(r, attrs))
    return r.g.op(f"opaque{len(inputs)}", key, list(_output_dims(r, node, 0)), *inputs)


def opaque_outputs(r: Reader, node: onnx.NodeProto) -> list[Tensor | None]:
    """`node` as opaque operators, one per output: tensors as operands, other constants kept in the
    key (`opaque`'s input layout), omitted optional inputs kept in place; output k of a node with
    n > 1 outputs is `__output=[k, n]` (the export writes the node once). Tensors of any element
    type flow between opaque nodes (a bool mask into a Where). Output shapes from shape inference."""
    if _subgraphs(node):
        raise NodeError(f"its branches depend on the program's inputs (an {node.op_type} whose condition or trip "
                        "count shape inference cannot fix); eqdsl carries only ones known at import")
    attrs = {a.name: _attr_value(node, a) for a in node.attribute}
    inputs, items = _operands(r, node)
    if any(item != "t" for item in items):
        attrs[opaque.INPUTS] = items
    if not 1 <= len(inputs) <= opaque.MAX_INPUTS:
        raise NodeError(f"{node.op_type} with {len(inputs)} tensor inputs has no equivalent in the tensat "
                        f"language (opaque operators take 1–{opaque.MAX_INPUTS} tensors)")
    attrs = _opset_attrs(r, attrs)
    if len(node.output) == 1:
        key = opaque.encode(node.op_type, node.domain, attrs)
        return [r.g.op(f"opaque{len(inputs)}", key, list(_output_dims(r, node, 0)), *inputs)]
    outputs: list[Tensor | None] = []
    for k, name in enumerate(node.output):
        key = opaque.encode(node.op_type, node.domain, {**attrs, opaque.OUTPUT: (k, len(node.output))})
        dims = _output_dims(r, node, k) if name and _used(r, name) else None
        outputs.append(r.g.op(f"opaque{len(inputs)}", key, list(dims), *inputs) if dims is not None else None)
    return outputs


def _opset_attrs(r: Reader, attrs: dict[str, Any]) -> dict[str, Any]:
    return {**attrs, opaque.OPSET: r.opset} if r.opset != opaque.DEFAULT_OPSET else attrs


def _output_dims(r: Reader, node: onnx.NodeProto, k: int) -> tuple[int, ...]:
    dims = r.shapes.get(node.output[k])
    # the whole-graph inference lost it (a Reshape to a computed shape): infer this node alone
    return dims if dims is not None else node_output_shape(r, node, k)


def folded(r: Reader, node: onnx.NodeProto) -> list[Value] | None:
    """The node's outputs computed at import when they do not depend on the program's inputs (the
    shape arithmetic exporters write: Shape → Gather → Concat → Reshape; T5's position buckets), else
    None: `Shape` of a tensor (its dims are static), or a default-domain node whose inputs are all
    constants, unless its outputs would hold more than `MAX_FOLDED` values (an Expand kept in the
    program rather than stored). ONNX Runtime folds these too when it loads a model."""
    if node.domain not in ("", "ai.onnx"):
        return None
    first = r.env.get(node.input[0]) if node.input and node.input[0] else None
    if node.op_type == "Shape" and isinstance(first, Tensor):
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        dims = first.dims[attrs.get("start", 0):attrs.get("end", len(first.dims))]
        return [np.array(dims, dtype=np.int64)]
    values = [r.env.get(n) for n in node.input if n]
    arrays = [v for v in values if isinstance(v, np.ndarray)]
    if not values or len(arrays) != len(values):
        return None
    if any(int(np.prod(r.shapes.get(o) or (0,))) > MAX_FOLDED for o in node.output if o):
        return None
    outputs = run_node(node, {n: cast(np.ndarray, r.env[n]) for n in node.input if n}, r.opset)
    return outputs if all(isinstance(v, np.ndarray) and v.size <= MAX_FOLDED for v in outputs) else None


MAX_FOLDED = 1 << 22  # values a node computed at import may hold (16 MiB of float32)


def run_node(node: onnx.NodeProto, inputs: dict[str, np.ndarray], opset: int) -> list[Value]:
    """One node with constant inputs, run (`opaque.run_onnx`)."""
    inits = [numpy_helper.from_array(v, n) for n, v in inputs.items()]
    model = _one_node(node, [], inits, [helper.make_opsetid("", opset)], [o for o in node.output if o])
    try:
        model = onnx.shape_inference.infer_shapes(model)  # ONNX Runtime wants the outputs' types
        return list(opaque.run_onnx(model, {}))
    except Exception as err:  # noqa: BLE001  the runtime's own errors, whatever their type
        raise NodeError(f"cannot compute it before the program runs (its inputs are constants): "
                        f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}") from None


def _one_node(node: onnx.NodeProto, inputs: list[onnx.ValueInfoProto], inits: list[onnx.TensorProto],
              opsets: list[onnx.OperatorSetIdProto], outputs: list[str]) -> onnx.ModelProto:
    """A model of `node` alone (constant inputs as initializers; outputs' types left to inference)."""
    graph = helper.make_graph([node], "one", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs], inits)
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def node_output_shape(r: Reader, node: onnx.NodeProto, k: int = 0) -> tuple[int, ...]:
    """Output k's static shape by ONNX shape inference on the node alone, its tensor
    inputs given the dims the import knows and its constant inputs their values."""
    inputs, inits = [], []
    for name in dict.fromkeys(n for n in node.input if n):
        value = r.env.get(name)
        if isinstance(value, Tensor):
            inputs.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, list(value.dims)))
        elif isinstance(value, np.ndarray):
            inits.append(numpy_helper.from_array(value, name))
    model = _one_node(node, inputs, inits, list(r.model.opset_import), [node.output[k]])
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as err:  # noqa: BLE001  inference errors come in several types
        raise NodeError(f"shape inference fails on it: {str(err).strip().splitlines()[0]}") from None
    shape = _inferred_shapes(inferred).get(node.output[k])
    if shape is None:
        raise NodeError(f"shape inference gives no static shape for output {node.output[k]!r}")
    return shape


def _operands(r: Reader, node: onnx.NodeProto) -> tuple[list[Tensor], tuple[Any, ...]]:
    """The node's float32 inputs as tensors, and its input layout (`opaque.layout`)."""
    tensors: list[Tensor] = []
    items: list[Any] = []
    for k, name in enumerate(node.input):
        value = r.env.get(name) if name else None
        if not name:
            items.append("")
        elif isinstance(value, np.ndarray) and value.dtype != np.float32:
            if value.size > MAX_KEPT_CONSTANT:
                raise NodeError(f"{input_role(node, k)} holds {value.size} {value.dtype} values; an opaque "
                                f"operator keeps at most {MAX_KEPT_CONSTANT} in its key")
            items.append(opaque.constant_item(value))
        else:
            try:
                tensors.append(r.tensor(name))
            except NodeError as err:  # the role is looked up only for the message
                raise NodeError(f"{input_role(node, k)}: {err}") from None
            items.append("t")
    return tensors, tuple(items)


MAX_KEPT_CONSTANT = 65_536


def input_role(node: onnx.NodeProto, k: int) -> str:
    """`Slice input 'starts'`: the k-th input by its name in the operator's schema, where known."""
    try:
        formal = onnx.defs.get_schema(node.op_type, domain=node.domain).inputs
        name = formal[min(k, len(formal) - 1)].name if formal else None
    except onnx.defs.SchemaError:
        name = None
    return f"{node.op_type} input {repr(name) if name else k} ({node.input[k]!r})"


def _attr_value(node: onnx.NodeProto, a: onnx.AttributeProto):
    value = helper.get_attribute_value(a)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list) and all(isinstance(v, (int, float, bytes)) for v in value):
        return tuple(v.decode() if isinstance(v, bytes) else v for v in value)
    if isinstance(value, (int, float)):
        return value
    raise NodeError(f"attribute {a.name} of an operator without rules must be a number, string or "
                    "list of them")


def _used(r: Reader, name: str) -> bool:
    return name in r.read


def _commutative(op: str) -> Handler:
    """Add, Mul: either operand may be the one that broadcasts."""
    def handle(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
        a, b = r.tensor(node.input[0]), r.tensor(node.input[1])
        y = _broadcast(r, op, a, b)
        return [y if y is not None else opaque_of(r, node, [a, b])]
    return handle


def _sub(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    a, b = r.tensor(node.input[0]), r.tensor(node.input[1])
    if not broadcasts(b.dims, a.dims):
        return [opaque_of(r, node, [a, b])]
    minus = r.g.smul(b, r.derived("eqdsl.minus_one", np.array([-1.0], dtype=np.float32)))
    return [r.g.ewadd(a, minus)]


def rational(value: np.ndarray) -> tuple[int, int] | None:
    """(num, den), den >= 1, with float32(num / den) == the float32 scalar `value` — the simplest
    such fraction — or None (not finite, or no fraction of 64-bit integers)."""
    if not np.isfinite(value):
        return None
    target = np.float32(value)
    for q in (Fraction(float(target)).limit_denominator(1 << 20), Fraction(float(target))):
        if np.float32(q.numerator / q.denominator) == target and max(abs(q.numerator), q.denominator) < 1 << 62:
            return q.numerator, q.denominator
    return None


def _div(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    a, divisor = r.tensor(node.input[0]), r.env.get(node.input[1])
    exact = (rational(divisor) if isinstance(divisor, np.ndarray) and divisor.shape == ()
             and divisor.dtype == np.float32 else None)
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


def _alias(r: Reader, node: onnx.NodeProto, attrs: dict) -> list[Value]:
    if node.op_type == "Dropout" and len(node.output) > 1 and _used(r, node.output[1]):
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
    return [numpy_helper.to_array(attrs["value"])]





FAMILIES: dict[str, Callable[..., Handler]] = {
    "conv": fixed(_conv), "gemm": fixed(_gemm), "matmul": fixed(_matmul),
    "commutative": _commutative, "sub": fixed(_sub), "div": fixed(_div), "unary": _activation,
    "pool": lambda op, kind: _pool(kind), "global_pool": lambda op, kind: _global_pool(kind),
    "concat": fixed(_concat), "split": fixed(_split), "reshape": fixed(_reshape), "flatten": fixed(_flatten),
    "transpose": fixed(_transpose), "batchnorm": fixed(_batchnorm), "alias": fixed(_alias),
    "constant": fixed(_constant), "clip": fixed(_clip),
}
