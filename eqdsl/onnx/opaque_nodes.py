"""ONNX nodes the language has no operator for, as opaque nodes (`eqdsl.languages.tensor.opaque`
holds the key format): one per output used, tensors as operands, other constants in the key, the
values a node's graphs read from outside (If, Loop) as further operands.

Contract: `opaque_outputs(r, node)` gives one program tensor per node output (None for an unused
one) or raises `NodeError` naming what does not fit (an operator ONNX Runtime cannot run, more
than `opaque.MAX_INPUTS` tensors, a constant over `MAX_KEPT_CONSTANT` values);
`opaque_of(r, node, inputs, as_op)` the same for a one-output node, or over given operands.
"""
from __future__ import annotations

from typing import Any, cast

import numpy as np
import onnx
from onnx import helper, numpy_helper

from eqdsl.ir.builder import Tensor
from eqdsl.languages.tensor import opaque
from eqdsl.onnx.reader import NodeError, Reader, all_nodes, node_output_shape, read_names, subgraphs


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
    if not opaque.runnable(node.op_type, node.domain):
        raise NodeError(f"operator {node.domain}::{node.op_type} is neither ONNX's nor ONNX Runtime's (a custom "
                        "operator's library is not loaded): eqdsl validates and times models on ONNX Runtime")
    attrs = {a.name: _attr_value(node, a) for a in node.attribute}
    inputs, items = _operands(r, node)
    if any(item != "t" for item in items):
        attrs[opaque.INPUTS] = items
    if subgraphs(node):
        captured, constants = _captured(r, node)
        attrs.update({a.name: opaque.graph_text(_with_constants(a.g, constants)) for a in node.attribute
                      if a.type == onnx.AttributeProto.GRAPH})
        if captured:
            attrs[opaque.CAPTURES] = tuple(captured)
            inputs += [r.tensor(name) for name in captured]
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
        dims = _output_dims(r, node, k) if name and r.used(name) else None
        outputs.append(r.g.op(f"opaque{len(inputs)}", key, list(dims), *inputs) if dims is not None else None)
    return outputs


def _captured(r: Reader, node: onnx.NodeProto) -> tuple[list[str], dict[str, np.ndarray]]:
    """What `node`'s graphs read from the enclosing graph: program tensors and float32 weights (the
    opaque node's operands after its own), and other constants (added to the graphs as initializers)."""
    inner = set()
    for g in subgraphs(node):
        inner |= {i.name for i in g.input} | {t.name for t in g.initializer}
        inner |= {o for sub in all_nodes(g) for o in sub.output} | {i.name for sub in all_nodes(g)
                                                                     for a in sub.attribute if a.type == a.GRAPH
                                                                     for i in a.g.input}
    outer = sorted(read_names(node) - set(node.input) - inner)
    tensors = [name for name in outer if isinstance(r.env.get(name), Tensor) or r.dtype(name) == np.float32]
    constants = {name: r.env[name] for name in outer if name not in tensors and isinstance(r.env.get(name), np.ndarray)}
    missing = [name for name in outer if name not in r.env]
    if missing:
        raise NodeError(f"its graphs read {missing[0]!r}, which no earlier node produces")
    return tensors, cast(dict[str, np.ndarray], constants)


def _with_constants(graph: onnx.GraphProto, constants: dict[str, np.ndarray]) -> onnx.GraphProto:
    """`graph` with the constants it reads from outside as its own initializers."""
    copy = onnx.GraphProto()
    copy.CopyFrom(graph)
    copy.initializer.extend(numpy_helper.from_array(v, k) for k, v in constants.items())
    return copy


def _opset_attrs(r: Reader, attrs: dict[str, Any]) -> dict[str, Any]:
    return {**attrs, opaque.OPSET: r.opset} if r.opset != opaque.DEFAULT_OPSET else attrs


def _output_dims(r: Reader, node: onnx.NodeProto, k: int) -> tuple[int, ...]:
    dims = r.shapes.get(node.output[k])
    # the whole-graph inference lost it (a Reshape to a computed shape): infer this node alone
    return dims if dims is not None else node_output_shape(r, node, k)


def _operands(r: Reader, node: onnx.NodeProto) -> tuple[list[Tensor], tuple[Any, ...]]:
    """The node's float32 inputs as tensors, and its input layout (`opaque.layout`)."""
    tensors: list[Tensor] = []
    items: list[Any] = []
    for k, name in enumerate(node.input):
        value = r.env.get(name) if name else None
        if not name:
            items.append("")
        elif isinstance(value, np.ndarray) and value.dtype != np.float32 and value.size <= MAX_KEPT_CONSTANT:
            items.append(opaque.constant_item(value))  # exact in the key: a Slice's starts, a Reshape's shape
        elif isinstance(value, np.ndarray) and value.dtype != np.float32:
            tensors.append(r.typed_weight(name))  # quantized weights: a weight of their own type
            items.append("t")
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
    if a.type == onnx.AttributeProto.GRAPH:
        return None  # set by `opaque_outputs`, with the constants the graph reads
    value = helper.get_attribute_value(a)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list) and all(isinstance(v, (int, float, bytes)) for v in value):
        return tuple(v.decode() if isinstance(v, bytes) else v for v in value)
    if isinstance(value, (int, float)):
        return value
    raise NodeError(f"attribute {a.name} of an operator without rules must be a number, string or "
                    "list of them")
