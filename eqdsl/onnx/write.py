"""A program of the tensor language (and its weights) → an ONNX model.

Contract: `to_onnx(lang, program, weights)` returns a `ModelProto` (opset `OPSET`) that passes
`onnx.checker.check_model(full_check=True)`: graph inputs are the program's `input` leaves, graph
outputs its roots in order (`noop` roots are unpacked), initializers the weights the program uses
under their own ids. Weight-only subterms the optimizer created (a concatenation of kernels, an
enlarged or merged kernel, a reshaped bias) are folded with the reference semantics into
`folded_N` initializers. Fused activations become separate operators; opaque nodes are re-emitted
as they were imported. A weight the store lacks, or one whose size disagrees with its dims, raises
`EqdslError`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.ir.builder import program_shapes
from eqdsl.languages.tensor import opaque
from eqdsl.languages.tensor.codes import Act
from eqdsl.languages.tensor.folding import const_nodes, output_nodes
from eqdsl.languages.tensor.ops import INPUTS, OPAQUE, OPS, SEMANTICS
from eqdsl.languages.tensor.reference import typed_dtype
from eqdsl.onnx.export_forms import FAMILIES, Emit
from eqdsl.onnx.reader import needed_nodes, read_names
from eqdsl.onnx.regions import splice_regions
from eqdsl.onnx.weights import Weights

OPSET = opaque.DEFAULT_OPSET
# A model with opaque nodes is written at the highest opset their semantics name (`opaque.OPSET`),
# raised to what the forms eqdsl writes itself need (13; these later): an opaque node keeps its
# semantics (ReduceMean's `axes` attribute before 18, an input from 18 on).
OWN_MIN_OPSET = 13
# from the operator table: the ONNX node types that need a later opset, the activations by code
MIN_OPSET = {s.onnx_out.kwargs["onnx_type"]: s.min_opset for s in OPS
             if s.min_opset and s.onnx_out and "onnx_type" in s.onnx_out.kwargs}
ACT_OPS: dict[int, str] = {s.act: s.onnx_out.kwargs["onnx_type"] for s in OPS if s.act is not None and s.onnx_out}


class Emitter:
    """Walks the program once; `names[i]` is the ONNX value holding node i."""

    def __init__(self, lang: ir.Language, program: ir.Program, weights: Weights) -> None:
        self.program, self.weights = program, weights
        self.shapes = program_shapes(lang, program)
        self.const = const_nodes(lang, program)
        self.names: list[str] = [""] * len(program.nodes)
        self.values: dict[int, Any] = {}  # arrays, or pairs of them (a split)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, onnx.TensorProto] = {}
        self.inputs: list[onnx.ValueInfoProto] = []
        self.opset_floor = 0  # the highest opset an opaque node's semantics name (0: no opaque node)
        self.shared: dict[tuple, onnx.NodeProto] = {}  # one ONNX node per multi-output opaque operator
        self.captured: dict[str, str] = {}  # a name branches read → the value copied to it

    def used_nodes(self, outputs: list[str]) -> list[onnx.NodeProto]:
        """The emitted nodes that `outputs` need, in order: a Pad whose padding a Conv took over
        (`export_forms._padding`) is left out."""
        return needed_nodes(self.nodes, outputs)[0]

    def require(self, opset: int) -> None:
        self.opset_floor = max(self.opset_floor, opset)

    def opset(self) -> int:
        if not self.opset_floor:
            return OPSET
        own = max([OWN_MIN_OPSET] + [MIN_OPSET.get(n.op_type, OWN_MIN_OPSET) for n in self.nodes if not n.domain])
        return max(own, self.opset_floor)

    def dims(self, i: int, arg: int | None = None) -> tuple[int, ...]:
        """The shape of node i, or of its child at argument position `arg`."""
        if arg is not None:
            child = self.program.nodes[i].args[arg]
            assert isinstance(child, ir.Child)
            i = child.index
        return cast(tuple[int, ...], self.shapes[i])

    def node(self, op_type: str, inputs: list[str], out: str, **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"n{len(self.nodes)}", **attrs))
        return out

    def constant(self, name: str, value: np.ndarray) -> str:
        if name not in self.initializers:
            # np.asarray, not np.ascontiguousarray: that one makes a 0-d constant 1-d (Gather's index)
            self.initializers[name] = numpy_helper.from_array(np.asarray(value, order="C"), name)
        return name

    def activation(self, act: int, x: str, out: str) -> str:
        return x if act == Act.NONE else self.node(ACT_OPS[act], [x], out)

    def value(self, i: int) -> np.ndarray:
        """The folded value of constant node i (weights from the store)."""
        if i not in self.values:
            node = self.program.nodes[i]
            if node.op == "weight":
                self.values[i] = _weight(self.weights, str(node.args[0]), tuple(node.args[1]))  # type: ignore[arg-type]
            else:
                args = [self.value(a.index) if isinstance(a, ir.Child) else a for a in node.args]
                fn = SEMANTICS[node.op]
                assert callable(fn)
                result = fn(*args)
                kept = isinstance(result, tuple) or np.asarray(result).dtype.kind != "f"  # an opaque node's mask
                self.values[i] = result if kept else np.asarray(result, dtype=np.float32)
        return self.values[i]

    def operand(self, i: int) -> str:
        """The ONNX name of node i as an operand: constants become initializers on first use; a
        weight of one repeated value stays a `ConstantOfShape` node (`filled`)."""
        if i in self.const and not self.names[i]:
            node = self.program.nodes[i]
            name = str(node.args[0]) if node.op == "weight" else f"folded_{i}"
            value = self.value(i)
            self.names[i] = (self.filled(name, value) if node.op == "weight" and _one_value(value)
                             else self.constant(name, value))
        return self.names[i]

    def filled(self, name: str, value: np.ndarray) -> str:
        """`value`, all one number, as ConstantOfShape — as exporters such as Caffe2's write such
        weights: ONNX Runtime computes it once at load, and the model ran 6 % slower (the zoo's
        Inception-v2, 1 thread) with the same weights stored as initializers."""
        shape = self.constant(f"{name}__shape", np.array(value.shape, dtype=np.int64))
        fill = numpy_helper.from_array(np.array([value.flat[0]], dtype=value.dtype), f"{name}__value")
        return self.node("ConstantOfShape", [shape], name, value=fill)

    def emit(self, i: int) -> None:
        node = self.program.nodes[i]
        if i in self.const or node.op == "noop":
            return
        if node.op in INPUTS:
            name = str(node.args[0])
            typed = node.op != "input"
            kind = helper.np_dtype_to_tensor_dtype(typed_dtype(str(node.args[2]))) if typed else TensorProto.FLOAT
            self.inputs.append(helper.make_tensor_value_info(name, kind, list(self.dims(i))))
            self.names[i] = name
            return
        args = [self.operand(a.index) if isinstance(a, ir.Child) else a for a in node.args]
        emit = EMITTERS.get(node.op)
        if emit is None:
            raise EqdslError.one(f"export onnx: no ONNX form for a non-constant '{node.op}' node")
        self.names[i] = emit(self, i, args)


def _weight(weights: Weights, wid: str, dims: tuple[int, ...]) -> np.ndarray:
    if wid not in weights:
        raise EqdslError.one(f"export onnx: no value for weight {wid!r} (give the model it came from)")
    value = np.asarray(weights[wid])
    value = value.astype(np.float32) if value.dtype.kind == "f" else value  # an opaque operator's int8 weights
    if value.size != int(np.prod(dims)):
        raise EqdslError.one(f"export onnx: weight {wid!r} has {value.size} values, its dims {list(dims)} "
                             f"need {int(np.prod(dims))}")
    return value.reshape(dims)


EMITTERS: dict[str, Emit] = {spec.name: FAMILIES[spec.onnx_out.family](spec.name, **spec.onnx_out.kwargs)
                             for spec in OPS if spec.onnx_out is not None}
EXTERNAL_DATA_BYTES = 1 << 30  # protobuf cannot hold 2 GiB: larger models keep weights beside the file


FILLED_FROM = 16  # elements: a smaller weight of one value stays an initializer


def _one_value(value: Any) -> bool:
    a = np.asarray(value)
    return a.dtype.kind == "f" and a.size >= FILLED_FROM and bool(np.all(a == a.flat[0]))


@dataclass(frozen=True)
class Interface:
    """What the written model keeps of the model the program came from: its graph inputs (an input
    the program no longer reads stays, as the source declares it) and its output names."""

    inputs: tuple[onnx.ValueInfoProto, ...]
    outputs: tuple[str, ...]


def interface_of(path: Path) -> Interface:
    model = onnx.load(str(path), load_external_data=False)
    weights = {t.name for t in model.graph.initializer}
    return Interface(tuple(i for i in model.graph.input if i.name not in weights),
                     tuple(o.name for o in model.graph.output))


def to_onnx(lang: ir.Language, program: ir.Program, weights: Weights,
            interface: Interface | None = None) -> onnx.ModelProto:
    e = Emitter(lang, program, weights)
    for i in range(len(program.nodes)):
        e.emit(i)
    roots = output_nodes(program)
    names = list(interface.outputs) if interface and len(interface.outputs) == len(roots) else \
        [f"output{k}" for k in range(len(roots))]
    sources = [e.operand(r) for r in roots]
    nodes = _named_outputs(e.used_nodes(sources), sources, names)
    typed = [r for r in roots if program.nodes[r].op in OPAQUE]  # of any element type: inferred below
    outputs = [helper.make_empty_tensor_value_info(name) if r in typed else
               helper.make_tensor_value_info(name, TensorProto.FLOAT, list(e.dims(r))) for name, r in zip(names, roots)]
    nodes = splice_regions(_biased_convs(nodes, e.initializers), e.initializers)
    read = {name for n in nodes for name in read_names(n)}  # a branch's reads too
    graph = helper.make_graph(nodes, program.name, _graph_inputs(e.inputs, interface), outputs,
                              [t for name, t in e.initializers.items() if name in read])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", e.opset()), *_domains(e.nodes)],
                              producer_name="eqdsl")
    model.ir_version = 9  # the newest that ONNX Runtime 1.16+ reads
    return _typed_outputs(model, {name: e.dims(r) for name, r in zip(names, roots) if r in typed})


def _typed_outputs(model: onnx.ModelProto, dims: dict[str, tuple[int, ...]]) -> onnx.ModelProto:
    """The outputs an opaque node computes, typed as ONNX infers them (an ArgMax's int64)."""
    if not dims:
        return model
    typed = onnx.shape_inference.infer_shapes(_weightless(model)).graph.output
    inferred = {o.name: o.type.tensor_type.elem_type for o in typed}
    for k, o in enumerate(model.graph.output):
        if o.name in dims:
            kind = inferred.get(o.name) or TensorProto.FLOAT
            model.graph.output[k].CopyFrom(helper.make_tensor_value_info(o.name, kind, list(dims[o.name])))
    return model


def _weightless(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with its initializers as typed graph inputs: ONNX's inference needs their types and
    dims, not their values (VGG-19's weights made one inference 4.7 s)."""
    g = model.graph
    weights = [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in g.initializer]
    graph = helper.make_graph(list(g.node), g.name, [*g.input, *weights], list(g.output))
    return helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)


def _named_outputs(nodes: list[onnx.NodeProto], sources: list[str], names: list[str]) -> list[onnx.NodeProto]:
    """The graph's outputs under `names`: the node computing one writes it under its name; an
    input, a constant, or a value that is two outputs is copied by an Identity."""
    producer = {out: node for node in nodes for out in node.output}
    renamed: dict[str, str] = {}
    copies = []
    for source, name in zip(sources, names):
        if source in producer and source not in renamed:
            renamed[source] = name
        else:
            copies.append(helper.make_node("Identity", [renamed.get(source, source)], [name], name=f"{name}.copy"))
    for node in nodes:
        node.input[:] = [renamed.get(n, n) for n in node.input]
        node.output[:] = [renamed.get(n, n) for n in node.output]
    return nodes + copies


def _graph_inputs(emitted: list[onnx.ValueInfoProto], interface: Interface | None) -> list[onnx.ValueInfoProto]:
    """The program's inputs, in the source's order, with the source's inputs it no longer reads."""
    if interface is None:
        return emitted
    own = {i.name: i for i in emitted}
    ordered = [own.pop(i.name, i) for i in interface.inputs]
    return ordered + list(own.values())


def _biased_convs(nodes: list[onnx.NodeProto], initializers: dict[str, onnx.TensorProto]) -> list[onnx.NodeProto]:
    """Conv → Add(a [1, C, 1, 1] or one-element constant) as one Conv with its bias input, as
    models are written (the import reads a Conv's bias as that Add; a scalar shift joins it in
    `fusions`): where the Add is the Conv's only reader."""
    readers: dict[str, int] = {}
    for node in nodes:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    producer = {out: node for node in nodes for out in node.output}
    dropped: set[int] = set()
    for node in nodes:
        conv = producer.get(node.input[0]) if node.op_type == "Add" else None
        bias = initializers.get(node.input[1]) if conv is not None else None
        channels = _channels(conv, initializers) if conv is not None and conv.op_type == "Conv" else -1
        if conv is None or bias is None or len(conv.input) != 2 or readers[conv.output[0]] != 1 or channels < 0 \
                or list(bias.dims) not in ([1, channels, 1, 1], [1] * len(bias.dims)):
            continue
        name = f"{node.input[1]}.bias{channels}"  # a one-element shift may bias Convs of different widths
        if name not in initializers:
            values = np.broadcast_to(numpy_helper.to_array(bias).reshape(-1), (channels,)).copy()
            initializers[name] = numpy_helper.from_array(values, name)
        conv.input.append(name)
        conv.output[0] = node.output[0]
        dropped.add(id(node))
    return [node for node in nodes if id(node) not in dropped]


def _channels(conv: onnx.NodeProto, initializers: dict[str, onnx.TensorProto]) -> int:
    weight = initializers.get(conv.input[1])
    return int(weight.dims[0]) if weight is not None else -1


def _domains(nodes: list[onnx.NodeProto]) -> list[onnx.OperatorSetIdProto]:
    return [helper.make_opsetid(d, 1) for d in sorted({n.domain for n in nodes if n.domain})]


def save_model(model: onnx.ModelProto, path: Path) -> list[str]:
    """Write `model` to `path` (weights in `path.data` when large); the names of the files written."""
    size = sum(len(t.raw_data) for t in model.graph.initializer)
    if size < EXTERNAL_DATA_BYTES:
        onnx.save_model(model, str(path))
        return [path.name]
    data = f"{path.name}.data"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=data)
    return [path.name] + ([data] if (path.parent / data).exists() else [])  # small tensors stay inline


def copy_model(source: Path, path: Path) -> list[str]:
    """The model at `source`, as it is, written to `path` (`save_model`: its weights beside it
    where too large for one file); the names of the files written."""
    return save_model(onnx.load(str(source)), path)


def write_program(lang: ir.Language, program: ir.Program, weights: Weights, path: Path,
                  interface: Interface | None = None) -> list[str]:
    """`program` as an ONNX model at `path`, checked by `onnx.checker` (full check) as written."""
    files = save_model(to_onnx(lang, program, weights, interface), path)
    try:
        onnx.checker.check_model(str(path), full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise EqdslError.one(f"export onnx: ONNX rejects the written model: {first} (the language's operators "
                             "compute on float32: a program that applies one to a typed_input of another "
                             "element type cannot be written)") from None
    return files
