"""Reading an ONNX graph node by node: the `Reader` that import handlers share (the program being
built, each ONNX value's program tensor or constant, inferred shapes and element types), and what
is computed before the program runs (`folded`: nodes on constants; `node_output_shape`).

Contract: `Reader(lang, model)` for a model shape inference has annotated; `Reader.tensor(name)`
gives a value as a program tensor (a float32 constant becomes a weight) or raises `NodeError`;
`folded(r, node)` gives a node's outputs when its inputs are all constants (else None).
"""
from __future__ import annotations

from fractions import Fraction
from typing import cast

import numpy as np
import onnx
from onnx import helper, numpy_helper

from eqdsl import ir
from eqdsl.ir.builder import GraphBuilder, Tensor
from eqdsl.languages.tensor import opaque
from eqdsl.onnx.weights import Weights


class NodeError(Exception):
    """A node we cannot import; becomes an `EqdslError` naming the node."""


def tensor_array(tensor: onnx.TensorProto, what: str) -> np.ndarray:
    """A tensor's values; `NodeError` when its data does not match its dims or type (a damaged
    file), naming `what` (an initializer, a Constant's value)."""
    try:
        return numpy_helper.to_array(tensor)
    except (ValueError, TypeError, KeyError) as err:
        raise NodeError(f"{what} '{tensor.name}': its data does not match its dims {list(tensor.dims)} and type "
                        f"({err}); the file is damaged") from None


Value = Tensor | np.ndarray  # a program tensor, or a constant the import has not yet made a weight


def value_infos(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """Every typed value of `graph` and of the graphs nested in its nodes (If's branches, Loop's
    body), which shape inference annotates in place."""
    infos = list(graph.value_info) + list(graph.output) + list(graph.input)
    for node in graph.node:
        for sub in subgraphs(node):
            infos += value_infos(sub)
    return infos


def inferred_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...] | None]:
    shapes: dict[str, tuple[int, ...] | None] = {}
    for info in value_infos(model.graph):
        t = info.type.tensor_type
        if not t.HasField("shape"):
            shapes.setdefault(info.name, None)
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        shapes[info.name] = None if any(d is None for d in dims) else tuple(int(d or 0) for d in dims)
    return shapes


def all_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    return [n for node in graph.node for n in [node, *(m for g in subgraphs(node) for m in all_nodes(g))]]


def subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    return [g for a in node.attribute for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs))]


def read_names(node: onnx.NodeProto) -> set[str]:
    """The values `node` reads: its inputs, and for a node with branches (If, Loop) every name its
    branches read (those from the enclosing graph among them)."""
    names = {n for n in node.input if n}
    for g in subgraphs(node):
        names |= {o.name for o in g.output} | {n for sub in g.node for n in read_names(sub)}
    return names


def needed_nodes(nodes: list[onnx.NodeProto], outputs: list[str]) -> tuple[list[onnx.NodeProto], set[str]]:
    """The nodes (in order) that `outputs` need, and every value name those nodes read."""
    needed, kept = set(outputs), []
    for node in reversed(nodes):
        if any(o in needed for o in node.output):
            kept.append(node)
            needed.update(read_names(node))
    return kept[::-1], needed


def default_opset(model: onnx.ModelProto) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def inferred_types(model: onnx.ModelProto) -> dict[str, int]:
    return {info.name: info.type.tensor_type.elem_type for info in value_infos(model.graph)
            if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type}


class Reader:
    def __init__(self, lang: ir.Language, model: onnx.ModelProto) -> None:
        self.g = GraphBuilder(lang)
        self.model = model
        self.env: dict[str, Value] = {}
        self.weights: Weights = {}
        self.shapes = inferred_shapes(model)
        self.types = inferred_types(model)
        self.opaque_notes: dict[tuple[str, str], int] = {}  # (op type, why the language's form did not fit) → nodes
        self.opset = default_opset(model) or 13
        self.read = {name for node in all_nodes(model.graph) for name in read_names(node)} | \
            {o.name for o in model.graph.output}

    def used(self, name: str) -> bool:
        """Whether any node (in any graph) or a graph output reads value `name`."""
        return name in self.read

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
        exact = self.scalar_of(name, 0)
        if exact is not None:  # a scalar rules can match (`scalar(3, 1)`), not an anonymous weight
            return self.g.op("scalar", *exact)
        self.weights[name] = value
        return self.g.weight(name, list(value.shape))

    def typed_weight(self, name: str) -> Tensor:
        """The constant `name`, of any element type, as a `weight` leaf that keeps its type (an
        opaque operator's quantized weights: too large for its key)."""
        value = cast(np.ndarray, self.env[name])
        self.weights[name] = value
        return self.g.weight(name, list(value.shape))

    def operand(self, name: str, other: str) -> Tensor:
        """`tensor(name)` as an operand of a broadcasting element-wise op whose other operand is
        `other`; a constant that is a `scalar_of` the other's rank becomes that `scalar` (so rules
        written with scalars match it)."""
        partner = self.env.get(other)
        rank = -1 if partner is None else partner.ndim if isinstance(partner, np.ndarray) else len(partner.dims)
        exact = self.scalar_of(name, rank)
        return self.g.op("scalar", *exact) if exact is not None else self.tensor(name)

    def scalar_of(self, name: str, rank: int) -> tuple[int, int] | None:
        """(num, den) of a one-element float32 constant of rank at most `rank` — broadcast against
        a tensor of that rank it is the 0-d scalar of its value (paddle2onnx's `[1]`-shaped 3 and 6
        in hard-swish) — or None."""
        value = self.env.get(name)
        if isinstance(value, np.ndarray) and value.dtype == np.float32 and value.size == 1 and value.ndim <= rank:
            return rational(value.reshape(()))
        return None

    def const(self, name: str, what: str) -> np.ndarray:
        value = self.env.get(name)
        if not isinstance(value, np.ndarray):
            raise NodeError(f"{what} ({name!r}) must be a constant (an initializer or Constant node)")
        return value

    def derived(self, name: str, value: np.ndarray) -> Tensor:
        self.weights[name] = value.astype(np.float32)
        return self.g.weight(name, list(value.shape))


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


def folded(r: Reader, node: onnx.NodeProto, has_form: bool) -> list[Value] | None:
    """The node's outputs computed at import when they do not depend on the program's inputs (the
    shape arithmetic exporters write: Shape → Gather → Concat → Reshape; T5's position buckets), else
    None: `Shape` of a tensor (its dims are static), or a default-domain node whose inputs are all
    constants. A float32 node the language has a form for (`has_form`) whose outputs would hold
    more than `MAX_FOLDED` values stays in the program instead (an Expand of a weight); any other
    is computed whatever its size (the zoo's `ConstantOfShape` weights). ONNX Runtime folds these
    too when it loads a model."""
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
    capped = has_form and all(v.dtype == np.float32 for v in arrays)
    if capped and any(int(np.prod(r.shapes.get(o) or (0,))) > MAX_FOLDED for o in node.output if o):
        return None
    outputs = run_node(node, {n: cast(np.ndarray, r.env[n]) for n in node.input if n}, r.opset)
    small = all(isinstance(v, np.ndarray) and v.size <= MAX_FOLDED for v in outputs)
    return outputs if small or not capped else None


MAX_FOLDED = 1 << 22  # values a node computed at import may hold (16 MiB of float32)


def run_node(node: onnx.NodeProto, inputs: dict[str, np.ndarray], opset: int) -> list[Value]:
    """One node with constant inputs, run (`opaque.run_onnx`)."""
    inits = [numpy_helper.from_array(v, n) for n, v in inputs.items()]
    model = opaque.one_node_model(node, [], inits, [helper.make_opsetid("", opset)], [o for o in node.output if o])
    try:
        model = onnx.shape_inference.infer_shapes(model)  # ONNX Runtime wants the outputs' types
        return list(opaque.run_onnx(model, {}))
    except Exception as err:  # noqa: BLE001  the runtime's own errors, whatever their type
        raise NodeError(f"cannot compute it before the program runs (its inputs are constants): "
                        f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}") from None


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
    model = opaque.one_node_model(node, inputs, inits, list(r.model.opset_import), [node.output[k]])
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as err:  # noqa: BLE001  inference errors come in several types
        raise NodeError(f"shape inference fails on it: {str(err).strip().splitlines()[0]}") from None
    shape = inferred_shapes(inferred).get(node.output[k])
    if shape is None and node.domain not in ("", "ai.onnx"):  # ONNX knows no shapes of ORT's own operators
        shape = _shape_by_running(model, inputs, node.output[k])
    if shape is None:
        raise NodeError(f"shape inference gives no static shape for output {node.output[k]!r}")
    return shape


def _shape_by_running(model: onnx.ModelProto, inputs: list[onnx.ValueInfoProto], output: str) -> tuple[int, ...] | None:
    """The output's shape as ONNX Runtime computes it on two different random inputs (ONNX's
    inference does not know `com.microsoft` operators, such as a quantized LSTM); None where
    ONNX Runtime cannot run the node alone or the shapes differ (they depend on the values)."""
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info(output, onnx.TensorProto.FLOAT, None))
    shapes = set()
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        feeds = {i.name: rng.normal(size=[d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
                 for i in inputs}
        try:
            shapes.add(tuple(np.shape(opaque.run_onnx(model, feeds)[0])))
        except Exception:  # noqa: BLE001  the runtime's own errors, whatever their type
            return None
    return shapes.pop() if len(shapes) == 1 else None
