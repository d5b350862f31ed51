"""Opaque operators: ONNX operators the tensor language has no rules for, carried unchanged.

An opaque node's `key` is the ONNX operator with its attributes, readable and exact:
`Softmax(axis=-1)`, `com.microsoft::Gelu()`, `LayerNormalization(axis=-1, epsilon=9.999999747378752e-06)`.
Attribute values are Python literals (int, float, str, lists of them); floats are written as the
shortest decimal that reads back to the same float32. Contract: `decode(encode(op, domain, attrs))` gives
the same triple; `decode` of a malformed key raises `ValueError`; `evaluate(key, dims, *inputs)`
runs the operator with ONNX's reference evaluator (the opaque node's reference semantics).

An operator whose ONNX inputs are not all program tensors carries its input layout in the key, as
the attribute `INPUTS` (`__inputs`, a name no ONNX attribute has): one item per ONNX input, `"t"` for
the next tensor operand, `""` for an omitted optional input, `(dtype, dims, values)` for a constant
kept exactly (int64 starts of a Slice): `Slice(__inputs=["t", ["int64", [1], [0]], ...])`.
`layout(attrs)` reads it (all tensors when absent); `constant(item)` rebuilds a constant. A key
read from a model at another opset than `DEFAULT_OPSET` says which (`__opset=13`): ReduceMean's
`axes` is an attribute before opset 18, an input from 18 on. Output k of an operator with n > 1
outputs is the key with `__output=[k, n]` (`OUTPUT`; LSTM's Y_h is `LSTM(..., __output=[1, 3])`):
one opaque node per output used, written back as one ONNX node. A graph-valued attribute (If's
branches, Loop's body) is the serialized graph, base64, after `GRAPH` (`graph_value`); the values
its graphs read from the enclosing graph are `__captures=[names]` (`CAPTURES`), tensor operands
after the ONNX inputs' ones, fed under those names. Operands and results keep their
element type (a bool mask from IsNaN into a Where): float64 operands run as float32, any other
type as it is.
"""
from __future__ import annotations

import ast
import functools
import re
from typing import Any, cast

import numpy as np

AttrValue = int | float | str | tuple[int, ...] | tuple[float, ...] | tuple[str, ...]

_KEY = re.compile(r"^(?:(?P<domain>[A-Za-z0-9_.]+)::)?(?P<op>[A-Za-z_][A-Za-z0-9_]*)\((?P<attrs>.*)\)$", re.S)


INPUTS = "__inputs"
OPSET = "__opset"  # the ONNX opset whose semantics the operator has; absent: DEFAULT_OPSET
OUTPUT = "__output"  # [k, n]: the k-th of the operator's n outputs; absent: its only output
MAX_INPUTS = 8  # opaque1 … opaque8 in rulesets/tensor.eqr
CAPTURES = "__captures"  # names a graph attribute reads from the enclosing graph
GRAPH = "onnx.GraphProto:"  # a graph attribute's value: this, then its serialization in base64
DEFAULT_OPSET = 20  # what eqdsl writes (Gelu 20, LayerNormalization 17); ONNX Runtime ≥ 1.16 runs it
Layout = tuple[Any, ...]  # "t", "" or (dtype, dims, values) per ONNX input


def layout(attrs: dict[str, Any], tensors: int) -> Layout:
    """The key's input layout; `tensors` operands in order when the key has none."""
    return tuple(attrs[INPUTS]) if INPUTS in attrs else ("t",) * tensors


def graph_text(graph: Any) -> str:
    import base64

    return GRAPH + base64.b64encode(graph.SerializeToString()).decode()


def node_attributes(attrs: dict[str, Any]) -> dict[str, Any]:
    """The key's attributes as `onnx.helper.make_node` takes them: graph texts as graphs, the
    key's own entries (`__inputs`, …) left out."""
    import base64

    from onnx import GraphProto

    out: dict[str, Any] = {}
    for name, value in attrs.items():
        if name.startswith("__"):
            continue
        if isinstance(value, str) and value.startswith(GRAPH):
            graph = GraphProto()
            graph.ParseFromString(base64.b64decode(value[len(GRAPH):]))
            value = graph
        out[name] = value
    return out


def captures(attrs: dict[str, Any]) -> tuple[str, ...]:
    return tuple(attrs.get(CAPTURES, ()))


def constant(item: Any) -> np.ndarray:
    dtype, dims, values = item
    return np.array(values, dtype=np.dtype(dtype)).reshape(tuple(dims))


def constant_item(value: np.ndarray) -> tuple[str, tuple[int, ...], tuple[Any, ...]]:
    flat = value.reshape(-1).tolist()
    return str(value.dtype), tuple(int(d) for d in value.shape), tuple(flat)


def encode(op_type: str, domain: str, attrs: dict[str, Any]) -> str:
    body = ", ".join(f"{name}={_literal(value)}" for name, value in sorted(attrs.items()))
    return f"{domain + '::' if domain else ''}{op_type}({body})"


def _literal(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, float):  # ONNX floats are float32: the shortest text that reads back to it
        return str(np.float32(value))
    return repr(value)


def decode(key: str) -> tuple[str, str, dict[str, AttrValue]]:
    m = _KEY.match(key)
    if m is None:
        raise ValueError(f"expected OP(name=value, ...), got {key!r}")
    try:
        call = ast.parse(f"f({m['attrs']})", mode="eval").body
    except SyntaxError:
        raise ValueError(f"bad attribute list in {key!r}") from None
    if not isinstance(call, ast.Call) or call.args:
        raise ValueError(f"attributes must be name=value in {key!r}")
    attrs: dict[str, AttrValue] = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise ValueError(f"attributes must be name=value in {key!r}")
        value = ast.literal_eval(kw.value)
        attrs[kw.arg] = tuple(value) if isinstance(value, list) else value
    return m["op"], m["domain"] or "", attrs


def output_of(attrs: dict[str, Any]) -> tuple[int, int]:
    """(k, n): which of the operator's n outputs the key names."""
    k, n = attrs.get(OUTPUT, (0, 1))
    return int(k), int(n)


def evaluate(key: str, dims: tuple[int, ...], *inputs: Any) -> np.ndarray:
    """The operator on `inputs` (`run_onnx`); a float result as float64, any other as it is."""
    import onnx
    from onnx import helper, numpy_helper

    op_type, domain, attrs = decode(key)
    captured = captures(attrs)
    items = layout(attrs, len(inputs) - len(captured))
    read_at = int(cast(int, attrs.get(OPSET, DEFAULT_OPSET)))
    k, n = output_of(attrs)
    own = len(inputs) - len(captured)
    feeds = {**{f"in{i}": _as_run(x) for i, x in enumerate(inputs[:own])},
             **{name: _as_run(x) for name, x in zip(captured, inputs[own:])}}
    wired, constants, tensors = [], [], iter(list(feeds)[:own])
    for j, item in enumerate(items):
        if item in ("t", ""):
            wired.append(next(tensors) if item == "t" else "")
        else:
            wired.append(f"c{j}")
            constants.append(numpy_helper.from_array(constant(item), f"c{j}"))
    outs = [f"out{j}" for j in range(n)]
    node = helper.make_node(op_type, wired, outs, domain=domain or None, **node_attributes(attrs))
    infos = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
             for name, x in feeds.items()]
    opsets = [helper.make_opsetid("", read_at)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = onnx.shape_inference.infer_shapes(one_node_model(node, infos, constants, opsets, outs))
    out = np.asarray(run_onnx(model, feeds)[k]).reshape(dims)
    return out.astype(np.float64) if out.dtype.kind == "f" else out


def _as_run(x: Any) -> np.ndarray:
    value = np.asarray(x)
    return value.astype(np.float32) if value.dtype.kind == "f" else value


def one_node_model(node: Any, inputs: list, inits: list, opsets: list, outputs: list[str]) -> Any:
    """A model of `node` alone: `inputs` value infos, constant inputs as initializers, the
    outputs' types left to shape inference (ONNX Runtime wants them declared: infer before running)."""
    from onnx import helper

    graph = helper.make_graph([node], "one", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs], inits)
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def runnable(op_type: str, domain: str) -> bool:
    """Whether `run_onnx` can run the operator: ONNX defines it, or ONNX Runtime (where installed)
    registers it (its `com.microsoft` operators); a custom domain's operators need their library."""
    import onnx

    if onnx.defs.has(op_type, domain):
        return True
    try:
        from onnxruntime.capi import _pybind_state
    except ImportError:
        return False
    return (domain, op_type) in _registered(_pybind_state)


@functools.cache
def _registered(state: Any) -> frozenset[tuple[str, str]]:
    return frozenset((s.domain, s.name) for s in state.get_all_operator_schema())


def run_onnx(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """A small ONNX model's outputs: by ONNX Runtime (CPU, one thread) where it is installed, else
    by ONNX's reference evaluator (slower, and failing on some real models: DeepLabV3's linear
    Resize took 24 GB; BERT's mask GatherElements raised "cannot reshape array of size 1")."""
    try:
        import onnxruntime as ort
    except ImportError:
        from onnx.reference import ReferenceEvaluator

        return [np.asarray(v) for v in cast(list, ReferenceEvaluator(model).run(None, feeds))]
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.log_severity_level = 1, 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return [np.asarray(v) for v in session.run(None, feeds)]
