"""An ONNX model (opset 13–21) → a program of the `tensat` language and its weights.

Contract: `read_onnx(path, lang)` returns an `Imported` (program, weights, output names) or raises
`EqdslError` naming the file, the node and the attribute for anything it cannot represent
exactly: a model that fails the ONNX checker, a dynamic or unknown shape, dilation, ceil_mode,
Gemm's alpha/beta, a second output that is used. Operators the language has (the operator
table's `onnx_in` column, `HANDLERS`) map to its operators; any other single-output operator with
at most three tensor inputs becomes an opaque node (`eqdsl.languages.tensor.opaque`) that keeps
its attributes and output shape. Weights are the model's initializers (and Constant nodes) under
their own names; constants the import derives (a negated operand of Sub, a reciprocal for Div) get
names `<name>.<how>`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import onnx
from onnx import helper, numpy_helper, shape_inference

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.ir.builder import Tensor, without_dead_nodes
from eqdsl.languages.tensor.ops import OPS
from eqdsl.onnx.import_forms import FAMILIES, Handler, NodeError, Reader, Value, opaque_of
from eqdsl.onnx.weights import Weights

OPSETS = range(13, 22)

@dataclass(frozen=True)
class Imported:
    program: ir.Program
    weights: Weights
    outputs: tuple[str, ...]  # the model's output names, in root order


def _handlers() -> dict[str, Handler]:
    """ONNX op_type → its handler, from the operator table's `onnx_in` column."""
    return {op_type: FAMILIES[f.family](spec.name, *f.params) for spec in OPS for op_type, f in spec.onnx_in}


HANDLERS: dict[str, Handler] = _handlers()


def _load(path: Path) -> onnx.ModelProto:
    """Check (by path, which also works past protobuf's 2 GiB), infer shapes on the graph without
    its weights, then attach weights kept in external data files."""
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    try:
        onnx.checker.check_model(str(path), full_check=True)
        model = onnx.load(str(path), load_external_data=False)
        inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
        if any(uses_external_data(t) for t in inferred.graph.initializer):
            load_external_data_for_model(inferred, str(path.parent))
        return inferred
    except (OSError, onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        raise EqdslError.one(f"{path}: not a valid ONNX model: {str(err).strip().splitlines()[0]}") from None
    except Exception as err:  # noqa: BLE001  protobuf's DecodeError and friends: not a model at all
        raise EqdslError.one(f"{path}: cannot read an ONNX model: {type(err).__name__}: {err}") from None


def _check_opset(path: Path, model: onnx.ModelProto) -> None:
    default = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not default or default[0] not in OPSETS:
        found = default[0] if default else "none"
        raise EqdslError.one(f"{path}: expected ONNX opset {OPSETS.start}–{OPSETS.stop - 1}, found {found} "
                             "(convert it with onnx.version_converter)")


def _inputs(path: Path, r: Reader) -> None:
    graph = r.model.graph
    for init in graph.initializer:
        r.env[init.name] = numpy_helper.to_array(init)
    for info in graph.input:
        if info.name in r.env:
            continue
        dims = r.shapes.get(info.name)
        if dims is None:
            raise EqdslError.one(f"{path}: input {info.name!r} has a dynamic or unknown shape; eqdsl needs "
                                 "static shapes (fix them, e.g. with onnx.tools.update_model_dims)")
        if info.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise EqdslError.one(f"{path}: input {info.name!r} is not float32")
        r.env[info.name] = r.g.input(info.name, list(dims))


def _node(r: Reader, node: onnx.NodeProto) -> None:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
    handler = HANDLERS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
    if handler is None:
        outputs: list[Value] = [opaque_of(r, node, [r.tensor(n) for n in node.input if n])]
    else:
        outputs = handler(r, node, attrs)
    for name, value in zip(node.output, outputs):
        want = r.shapes.get(name)
        if isinstance(value, Tensor) and want is not None and value.dims != want:
            raise NodeError(f"imported as shape {list(value.dims)} but ONNX infers {list(want)} "
                            f"for {name!r} (an eqdsl bug: please report it)")
        r.env[name] = value


def read_onnx(path: Path, lang: ir.Language) -> Imported:
    model = _load(path)
    _check_opset(path, model)
    r = Reader(lang, model)
    _inputs(path, r)
    for k, node in enumerate(model.graph.node):
        try:
            _node(r, node)
        except (NodeError, EqdslError) as err:
            text = str(err) if isinstance(err, NodeError) else "; ".join(d.message for d in err.diagnostics)
            raise EqdslError.one(f"{path}: node {node.name or '#' + str(k)} ({node.op_type}): {text}") from None
    outputs = [o.name for o in model.graph.output]
    if not outputs:
        raise EqdslError.one(f"{path}: the model has no outputs")
    name = re.sub(r"\W", "_", model.graph.name or path.stem) or "model"
    name = name if name[0].isalpha() else f"m_{name}"
    try:
        roots = [r.tensor(o) for o in outputs]
    except NodeError as err:
        raise EqdslError.one(f"{path}: output: {err}") from None
    program = without_dead_nodes(r.g.program(name, roots))
    used = {str(n.args[0]) for n in program.nodes if n.op == "weight"}
    return Imported(program, {k: v for k, v in r.weights.items() if k in used}, tuple(outputs))

