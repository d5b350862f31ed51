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

from typing import Any, Callable, cast

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.importers.onnx.weights import Weights
from eqdsl.ir.builder import program_shapes
from eqdsl.languages.tensor import opaque
from eqdsl.languages.tensor.folding import const_nodes, output_nodes
from eqdsl.languages.tensor.semantics import LOWEST, SEMANTICS

OPSET = 20  # Gelu (20), LayerNormalization (17); ONNX Runtime ≥ 1.16 runs it
ACT_OPS = {1: "Sigmoid", 2: "Relu", 3: "Tanh"}
AUTO_PAD = {0: "SAME_UPPER", 1: "VALID"}  # SAME is TensorFlow's: the extra row goes at the end
LEAVES = {"input", "weight"}
ALIASES = {"dropout"}  # the identity at inference


class _Emitter:
    """Walks the program once; `names[i]` is the ONNX value holding node i."""

    def __init__(self, lang: ir.Language, program: ir.Program, weights: Weights) -> None:
        self.program, self.weights = program, weights
        self.shapes = program_shapes(lang, program)
        self.const = const_nodes(program)
        self.names: list[str] = [""] * len(program.nodes)
        self.values: dict[int, Any] = {}  # arrays, or pairs of them (a split)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, onnx.TensorProto] = {}
        self.inputs: list[onnx.ValueInfoProto] = []

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
            self.initializers[name] = numpy_helper.from_array(np.ascontiguousarray(value), name)
        return name

    def activation(self, act: int, x: str, out: str) -> str:
        return x if act == 0 else self.node(ACT_OPS[act], [x], out)

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
                self.values[i] = result if isinstance(result, tuple) else np.asarray(result, dtype=np.float32)
        return self.values[i]

    def operand(self, i: int) -> str:
        """The ONNX name of node i as an operand: constants become initializers on first use."""
        if i in self.const and not self.names[i]:
            node = self.program.nodes[i]
            name = str(node.args[0]) if node.op == "weight" else f"folded_{i}"
            self.names[i] = self.constant(name, self.value(i))
        return self.names[i]

    def emit(self, i: int) -> None:
        node = self.program.nodes[i]
        if i in self.const or node.op == "noop":
            return
        if node.op == "input":
            name = str(node.args[0])
            self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(self.dims(i))))
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
    value = np.asarray(weights[wid], dtype=np.float32)
    if value.size != int(np.prod(dims)):
        raise EqdslError.one(f"export onnx: weight {wid!r} has {value.size} values, its dims {list(dims)} "
                             f"need {int(np.prod(dims))}")
    return value.reshape(dims)


Emit = Callable[[_Emitter, int, list], str]


def _simple(op_type: str) -> Emit:
    return lambda e, i, a: e.node(op_type, a, f"t{i}")


def _matmul(e: _Emitter, i: int, a: list) -> str:
    act, x, w = a
    return e.activation(act, e.node("MatMul", [x, w], f"t{i}" if act == 0 else f"t{i}_mm"), f"t{i}")


def _conv(e: _Emitter, i: int, a: list) -> str:
    sh, sw, pad, act, x, w = a
    xs, ws = e.dims(i, 4), e.dims(i, 5)
    out = e.node("Conv", [x, w], f"t{i}" if act == 0 else f"t{i}_conv", strides=[sh, sw],
                 auto_pad=AUTO_PAD[pad], group=xs[1] // ws[1], kernel_shape=list(ws[2:]))
    return e.activation(act, out, f"t{i}")


def _pool(op_type: str) -> Emit:
    def emit(e: _Emitter, i: int, a: list) -> str:
        x, kh, kw, sh, sw, pad, act = a
        extra = {"count_include_pad": 0} if op_type == "AveragePool" else {}
        out = e.node(op_type, [x], f"t{i}" if act == 0 else f"t{i}_pool", kernel_shape=[kh, kw],
                     strides=[sh, sw], auto_pad=AUTO_PAD[pad], **extra)
        return e.activation(act, out, f"t{i}")
    return emit


def _concat(e: _Emitter, i: int, a: list) -> str:
    return e.node("Concat", a[1:], f"t{i}", axis=a[0])


def _split(e: _Emitter, i: int, a: list) -> str:
    axis, at, x = a
    sizes = e.constant(f"split_{i}", np.array([at, e.dims(i, 2)[axis] - at], dtype=np.int64))
    e.nodes.append(helper.make_node("Split", [x, sizes], [f"t{i}_0", f"t{i}_1"], name=f"n{len(e.nodes)}",
                                    axis=axis))
    return f"t{i}"


def _part(k: int) -> Emit:
    return lambda e, i, a: f"{a[0]}_{k}"


def _reshape(e: _Emitter, i: int, a: list) -> str:
    dims = e.constant(f"shape_{i}", np.array(a[1], dtype=np.int64))
    return e.node("Reshape", [a[0], dims], f"t{i}")


def _pad(e: _Emitter, i: int, a: list) -> str:
    x, top, bottom, left, right, fill = a
    pads = e.constant(f"pads_{i}", np.array([0, 0, top, left, 0, 0, bottom, right], dtype=np.int64))
    value = e.constant(f"fill_{fill}", np.array(LOWEST if fill else 0.0, dtype=np.float32))
    return e.node("Pad", [x, pads, value], f"t{i}", mode="constant")


def _opaque(e: _Emitter, i: int, a: list) -> str:
    op_type, domain, attrs = opaque.decode(a[0])
    e.nodes.append(helper.make_node(op_type, a[2:], [f"t{i}"], name=f"n{len(e.nodes)}",
                                    domain=domain or None, **cast(dict[str, Any], attrs)))
    return f"t{i}"


EMITTERS: dict[str, Emit] = {
    "ewadd": _simple("Add"), "ewmul": _simple("Mul"), "smul": _simple("Mul"),
    "relu": _simple("Relu"), "tanh": _simple("Tanh"), "sigmoid": _simple("Sigmoid"),
    "matmul": _matmul, "conv2d": _conv, "poolmax": _pool("MaxPool"), "poolavg": _pool("AveragePool"),
    "transpose": lambda e, i, a: e.node("Transpose", [a[0]], f"t{i}", perm=list(a[1])),
    "concat": _concat, "concat3": _concat, "concat4": _concat, "concat5": _concat,
    "split": _split, "split0": _part(0), "split1": _part(1), "reshape": _reshape,
    "batchnorm": lambda e, i, a: e.node("BatchNormalization", a, f"t{i}", epsilon=1e-5),
    "dropout": lambda e, i, a: a[0], "pad2d": _pad,
    "opaque1": _opaque, "opaque2": _opaque, "opaque3": _opaque,
}


def to_onnx(lang: ir.Language, program: ir.Program, weights: Weights) -> onnx.ModelProto:
    e = _Emitter(lang, program, weights)
    for i in range(len(program.nodes)):
        e.emit(i)
    outputs = []
    for k, r in enumerate(output_nodes(program)):
        source = e.operand(r)
        e.node("Identity", [source], f"output{k}")
        outputs.append(helper.make_tensor_value_info(f"output{k}", TensorProto.FLOAT, list(e.dims(r))))
    graph = helper.make_graph(e.nodes, program.name, e.inputs, outputs, list(e.initializers.values()))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), *_domains(e.nodes)],
                              producer_name="eqdsl")
    model.ir_version = 9  # the newest that ONNX Runtime 1.16+ reads
    return model


def _domains(nodes: list[onnx.NodeProto]) -> list[onnx.OperatorSetIdProto]:
    return [helper.make_opsetid(d, 1) for d in sorted({n.domain for n in nodes if n.domain})]
