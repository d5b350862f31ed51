"""Non-float regions: a maximal connected subgraph of nodes that compute integer or boolean values
from the program's inputs (a mask, a one-hot encoding, a quantized block's integer arithmetic),
carried as one opaque operator whose key holds the subgraph.

A region is written in the key as ONNX's `If` on a constant true condition whose branch is the
subgraph, reading its inputs from the enclosing graph (`opaque.CAPTURES`): ONNX's own operator,
so the opaque machinery evaluates and writes it as any If with branches, and the writer splices
it back into the graph (`splice_regions`). Constants a region reads are its branch's
initializers up to `KEPT_IN_KEY` values (shapes, axes, zero points); larger ones (quantized
weights) are operands, referenced, not copied into the key.

Contract: `plan(r, nodes, dynamic_inputs)` returns the nodes in an order where each region's
members are contiguous, and each node's region (the member list, shared by its members) for the
regions of two or more nodes whose subgraph nothing outside reads back into (convex).
`region_outputs(r, members, readers)` imports one region as opaque nodes (one per value read
outside it: `readers` maps a value to the nodes reading it, a model output to a node outside
every region) and returns (value name, tensor) pairs, or None where it would take more than
`opaque.MAX_INPUTS` tensors, reads a value no node made or makes one ONNX's inference left
unshaped (its nodes are then imported one by one). `splice_regions(nodes, initializers)` is the writer's half.
"""
from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from eqdsl.ir.builder import Tensor
from eqdsl.languages.tensor import opaque
from eqdsl.onnx.reader import Reader, read_names, subgraphs

Region = list[onnx.NodeProto]
STATIC = frozenset({"Shape", "Size"})  # of a tensor with static dimensions: known at import
_TRUE = np.array(True)  # a region's If condition
KEPT_IN_KEY = 64  # values of a constant a region's key holds (shapes, axes, scalars); a larger one is an operand


def plan(r: Reader, nodes: list[onnx.NodeProto], dynamic_inputs: set[str]) -> tuple[list[onnx.NodeProto],
                                                                                    dict[int, Region]]:
    dynamic = set(dynamic_inputs)
    candidates = []
    for node in nodes:
        if node.op_type not in STATIC and read_names(node) & dynamic:
            dynamic.update(o for o in node.output if o)
            if _non_float(r, node):
                candidates.append(node)
    regions = [c for c in _components(candidates) if len(c) > 1 and _convex(c, nodes)]
    region_of = {id(n): region for region in regions for n in region}
    return _contracted_order(nodes, region_of), region_of


def _non_float(r: Reader, node: onnx.NodeProto) -> bool:
    """Integer or boolean outputs only, of a default-domain node without branches."""
    outputs = [o for o in node.output if o and r.used(o)]
    return (node.domain in ("", "ai.onnx") and not subgraphs(node) and bool(outputs)
            and all(r.dtype(o).kind in "iub" for o in outputs))


def _components(candidates: list[onnx.NodeProto]) -> list[Region]:
    """Candidates joined where one reads another's output, each component in the nodes' order."""
    parent = list(range(len(candidates)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    producer = {o: i for i, node in enumerate(candidates) for o in node.output if o}
    for i, node in enumerate(candidates):
        for name in node.input:
            if name in producer:
                parent[root(i)] = root(producer[name])
    groups: dict[int, Region] = {}
    for i, node in enumerate(candidates):
        groups.setdefault(root(i), []).append(node)
    return list(groups.values())


def _convex(region: Region, nodes: list[onnx.NodeProto]) -> bool:
    """No path leaves the region and comes back into it (one node for it would make a cycle)."""
    members = {id(n) for n in region}
    outside: set[str] = set()  # values computed outside the region from its outputs
    made = {o for n in region for o in n.output if o}
    for node in nodes:
        reads = read_names(node)
        if id(node) in members:
            if reads & outside:
                return False
        elif reads & (made | outside):
            outside.update(o for o in node.output if o)
    return True


def _contracted_order(nodes: list[onnx.NodeProto], region_of: dict[int, Region]) -> list[onnx.NodeProto]:
    """`nodes` with each region's members together: a node (or region) comes when every value it
    reads from the others is made (Kahn's order on the graph with each region one node)."""
    units: list[Region] = []
    seen: set[int] = set()
    for node in nodes:
        unit = region_of.get(id(node), [node])
        if id(unit[0]) not in seen:
            seen.add(id(unit[0]))
            units.append(unit)
    if len(units) == len(nodes):
        return nodes  # no region: the model's own order
    made_by = {o: k for k, unit in enumerate(units) for n in unit for o in n.output if o}
    needs = [{made_by[name] for n in unit for name in read_names(n) if made_by.get(name, k) != k}
             for k, unit in enumerate(units)]
    waiting = [len(need) for need in needs]
    unblocks: dict[int, list[int]] = {}
    for k, need in enumerate(needs):
        for j in need:
            unblocks.setdefault(j, []).append(k)
    ready = [k for k, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)  # the earliest unit first: the model's order wherever it can stay
    order: list[onnx.NodeProto] = []
    while ready:
        k = heapq.heappop(ready)
        order += units[k]
        for j in unblocks.get(k, []):
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, j)
    return order


def region_outputs(r: Reader, region: Region,
                   readers: dict[str, list[onnx.NodeProto]]) -> list[tuple[str, Tensor]] | None:
    members = {id(n) for n in region}
    made = [o for n in region for o in n.output if o]
    reads = list(dict.fromkeys(name for n in region for name in n.input if name and name not in made))
    if any(name not in r.env for name in reads):  # a value no node made: imported one by one, which says so
        return None
    kept = {name: value for name in reads if isinstance(value := r.env[name], np.ndarray)
            and value.size <= KEPT_IN_KEY}  # in the key; weights are operands, referenced
    captured = [name for name in reads if name not in kept]
    if not 1 <= len(captured) <= opaque.MAX_INPUTS:
        return None
    tensors = [r.typed_weight(name) if isinstance(r.env[name], np.ndarray) else r.tensor(name) for name in captured]
    constants = [numpy_helper.from_array(value, name) for name, value in kept.items()]
    outputs = [o for o in made if any(id(n) not in members for n in readers.get(o, []))]
    if any(r.shapes.get(o) is None for o in outputs):  # node by node, each shaped as opaque nodes are
        return None
    branch = helper.make_graph(region, "region", [], [helper.make_tensor_value_info(
        o, helper.np_dtype_to_tensor_dtype(r.dtype(o)), list(r.shapes[o] or ())) for o in outputs], constants)
    attrs: dict[str, Any] = {opaque.INPUTS: (opaque.constant_item(_TRUE),), opaque.CAPTURES: tuple(captured),
                             "then_branch": opaque.graph_text(branch), "else_branch": opaque.graph_text(branch)}
    if r.opset != opaque.DEFAULT_OPSET:
        attrs[opaque.OPSET] = r.opset
    return [(o, r.g.op(f"opaque{len(tensors)}", opaque.encode("If", "", {
        **attrs, **({opaque.OUTPUT: (k, len(outputs))} if len(outputs) > 1 else {})}), list(r.shapes[o] or ()),
        *tensors)) for k, o in enumerate(outputs)]


def splice_regions(nodes: list[onnx.NodeProto], initializers: dict[str, onnx.TensorProto]) -> list[onnx.NodeProto]:
    """Each If on a constant true condition (a region as eqdsl writes it) as its branch's nodes in
    its place: the branch's own values renamed under the If's first output, its outputs the If's."""
    spliced: list[onnx.NodeProto] = []
    for node in nodes:
        cond = initializers.get(node.input[0]) if node.op_type == "If" and node.input else None
        if cond is None or not bool(numpy_helper.to_array(cond).reshape(-1)[0]):
            spliced.append(node)
            continue
        branch = next(a.g for a in node.attribute if a.name == "then_branch")
        names = {o.name: out for o, out in zip(branch.output, node.output)}
        for value in branch.initializer:
            names.setdefault(value.name, f"{node.output[0]}/{value.name}")
            copy = onnx.TensorProto()
            copy.CopyFrom(value)
            copy.name = names[value.name]
            initializers[copy.name] = copy
        for inner in branch.node:
            names.update({o: f"{node.output[0]}/{o}" for o in inner.output if o and o not in names})
            copy = onnx.NodeProto()
            copy.CopyFrom(inner)
            copy.input[:] = [names.get(i, i) for i in inner.input]
            copy.output[:] = [names.get(o, o) for o in inner.output]
            copy.name = f"{node.name}/{inner.name}"
            spliced.append(copy)
    return spliced
