"""An ONNX model (opset 7–23) → a program of the `tensat` language and its weights.

Contract: `read_onnx(path, lang, shapes, constants)` returns an `Imported` (program, weights, output
names, notes, the inputs fixed to constants) or raises `EqdslError` naming the file, the node and
the attribute for anything it cannot represent exactly. Models below opset 13 are converted to 13
with `onnx.version_converter` (a note says so). `shapes` fixes the dimensions of inputs by name; an
input left with a dynamic dimension is an error that lists every such input and the option that
fixes it. `constants` fixes inputs' values. A non-float input is a `typed_input` (int64 token ids,
a bool mask): the operators it reaches stay opaque, and validation draws it as 0s and 1s. Only the
nodes the outputs need are read. Operators the language has (the operator table's `onnx_in`
column, `HANDLERS`) map to its operators where their tensors are float32; nodes on constants are
computed (`reader.folded`); an If on a known condition is its taken branch; local
functions are inlined; any other operator with 1–8 tensor inputs (an If, Loop, Scan with its graphs
and the values they read) becomes opaque nodes (`eqdsl.languages.tensor.opaque`), one per
output used, that keep its attributes and output shapes. Weights are the model's initializers (and
Constant nodes) under their own names; constants the import derives (a negated operand of Sub, a
reciprocal for Div) get names `<name>.<how>`.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
import onnx
from onnx import helper, shape_inference

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.ir.builder import Tensor, without_dead_nodes
from eqdsl.languages.tensor.ops import OPAQUE, OPS
from eqdsl.languages.tensor.reference import typed_dtype
from eqdsl.onnx import regions
from eqdsl.onnx.import_forms import FAMILIES, Handler
from eqdsl.onnx.opaque_nodes import opaque_of, opaque_outputs
from eqdsl.onnx.reader import NodeError, Reader, Value, default_opset, folded, needed_nodes, read_names, tensor_array
from eqdsl.onnx.weights import Weights

OPSETS = range(7, 24)
CONVERTED_TO = 13  # older models are converted to this opset (the first with Split's sizes as an input)
Shapes = dict[str, tuple[int, ...]]
Constants = dict[str, float | int | list]  # input name → the value it is fixed to (broadcast to its shape)

@dataclass(frozen=True)
class Imported:
    program: ir.Program
    weights: Weights
    outputs: tuple[str, ...]  # the model's output names, in root order
    notes: tuple[str, ...] = ()  # what the import changed on the way (an opset conversion)
    fixed: dict[str, np.ndarray] = field(default_factory=dict)  # inputs fixed to constants (`constants`)


def _handlers() -> dict[str, Handler]:
    """ONNX op_type → its handler, from the operator table's `onnx_in` column."""
    return {op_type: FAMILIES[f.family](spec.name, **f.kwargs) for spec in OPS for op_type, f in spec.onnx_in}


HANDLERS: dict[str, Handler] = _handlers()


def model_file(path: Path) -> Path:
    """`path`, or an error that says why it is not an ONNX file to read."""
    if not path.is_file():
        found = "a folder" if path.is_dir() else "not a regular file" if path.exists() else "no such file"
        raise EqdslError.one(f"{path}: {found}; expected an ONNX model (.onnx)")
    return path


def _load(path: Path, shapes: Shapes, fixed: set[str]) -> tuple[onnx.ModelProto, list[str]]:
    """Check (by path, which also works past protobuf's 2 GiB), convert an old opset, fix the
    given input shapes, infer shapes on the graph without its weights, then attach weights kept
    in external data files. Also the notes on what was changed."""
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    model_file(path)
    try:
        onnx.checker.check_model(str(path), full_check=True)
        model = onnx.load(str(path), load_external_data=False)
        model, notes = _converted(path, model)
        model, notes = _inlined_functions(path, model, notes)
        _fix_shapes(path, model, shapes, fixed)
        inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
        if any(uses_external_data(t) for t in inferred.graph.initializer):
            load_external_data_for_model(inferred, str(path.parent))
        return inferred, notes
    except EqdslError:
        raise
    except (OSError, onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        raise EqdslError.one(f"{path}: not a valid ONNX model: {str(err).strip().splitlines()[0]}") from None
    except Exception as err:  # noqa: BLE001  protobuf's DecodeError and friends: not a model at all
        raise EqdslError.one(f"{path}: cannot read an ONNX model: {type(err).__name__}: {err}") from None


def _inlined_functions(path: Path, model: onnx.ModelProto, notes: list[str]) -> tuple[onnx.ModelProto, list[str]]:
    """The model with calls of its local functions replaced by their bodies (`onnx.inliner`)."""
    if not model.functions:
        return model, notes
    from onnx import inliner

    try:
        inlined = inliner.inline_local_functions(model, convert_version=True)
    except Exception as err:  # noqa: BLE001  the inliner raises plain RuntimeErrors
        raise EqdslError.one(f"{path}: cannot inline its local functions: {str(err).strip().splitlines()[0]}") from None
    names = ", ".join(sorted({f.name for f in model.functions}))
    return inlined, notes + [f"local function(s) {names} inlined (onnx.inliner)"]


def _converted(path: Path, model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    found = default_opset(model)
    if found is None or found not in OPSETS:
        older = found is not None and found < OPSETS.start
        raise EqdslError.one(f"{path}: expected ONNX opset {OPSETS.start}–{OPSETS.stop - 1}, found "
                             f"{found if found is not None else 'none'}"
                             + (" (ONNX Runtime, which runs the input beside the result, supports opset 7 and "
                                "later: convert the model first, `onnx.version_converter.convert_version(model, "
                                f"{CONVERTED_TO})`)" if older else ""))
    if found >= CONVERTED_TO:
        return model, []
    from onnx import version_converter

    try:
        converted = version_converter.convert_version(model, CONVERTED_TO)
    except Exception as err:  # noqa: BLE001  the converter raises plain RuntimeErrors on what it lacks
        raise EqdslError.one(f"{path}: cannot convert opset {found} to {CONVERTED_TO} with "
                             f"onnx.version_converter: {str(err).strip().splitlines()[0]}") from None
    return converted, [f"converted from ONNX opset {found} to {CONVERTED_TO} (onnx.version_converter)"]


def _fix_shapes(path: Path, model: onnx.ModelProto, shapes: Shapes, fixed: set[str]) -> None:
    """Give the named inputs their dimensions; refuse a dynamic input left without one. The
    graph's inferred shapes and output shapes are dropped so inference redoes them."""
    graph = model.graph
    weights = {t.name for t in graph.initializer}
    inputs = {i.name: i for i in graph.input if i.name not in weights}
    for name in [*shapes, *fixed]:
        if name not in inputs:
            given = "shape" if name in shapes else "constant"
            raise EqdslError.one(f"{path}: {given} given for {name!r}, which is not an input of the model; "
                                 f"expected one of: {', '.join(inputs)}")
    for name, dims in shapes.items():
        _check_given_dims(path, name, dims)
    for name, info in inputs.items():
        if name not in shapes and name not in fixed:
            _check_static_dims(path, info)
    dynamic = [info for name, info in inputs.items()
               if name not in shapes and name not in fixed
               and not all(d.HasField("dim_value") for d in info.type.tensor_type.shape.dim)]
    if dynamic:
        listed = ", ".join(f"{info.name} {_dims_text(info)}" for info in dynamic)
        first = dynamic[0]
        example = [str(d.dim_value) if d.dim_value > 0 else "1" for d in first.type.tensor_type.shape.dim]
        raise EqdslError.one(f"{path}: input(s) with dynamic dimensions: {listed}; give their shapes with "
                             f"`program: {{onnx: FILE, shapes: {{{first.name}: [{', '.join(example)}]}}}}` or "
                             f"`eqdsl import onnx FILE --shape {first.name}={','.join(example)}`")
    if not shapes:
        return
    for name, dims in shapes.items():
        shape = inputs[name].type.tensor_type.shape
        if len(shape.dim) not in (0, len(dims)) and shape.dim:
            raise EqdslError.one(f"{path}: shape {list(dims)} given for {name!r}, which has rank {len(shape.dim)} "
                                 f"({_dims_text(inputs[name])})")
        shape.ClearField("dim")
        for d in dims:
            shape.dim.add().dim_value = d
    del graph.value_info[:]
    for out in graph.output:
        out.type.tensor_type.ClearField("shape")


MAX_ELEMENTS = 2 ** 31  # per input tensor: validation draws it as float64 (16 GiB), ONNX Runtime as float32


def _check_given_dims(path: Path, name: str, dims: tuple[int, ...]) -> None:
    """A shape the user gave (`--shape`, `shapes:`): sizes ≥ 1, at most `MAX_ELEMENTS` in all."""
    if any(d < 1 for d in dims):
        raise EqdslError.one(f"shape {list(dims)} given for {name!r}: expected every dimension ≥ 1")
    if math.prod(dims) > MAX_ELEMENTS:
        raise EqdslError.one(f"shape {list(dims)} given for {name!r} holds {math.prod(dims):.3g} elements; "
                             f"expected at most {MAX_ELEMENTS:,} (2^31)")


def _check_static_dims(path: Path, info: onnx.ValueInfoProto) -> None:
    """The model's own static dimensions of an input: ≥ 1 each, at most `MAX_ELEMENTS` in all
    (a dimension written as a number is static: -5 or 0 is a broken model, not a dynamic one)."""
    dims = info.type.tensor_type.shape.dim
    static = [d.dim_value for d in dims if d.HasField("dim_value")]
    if any(v < 1 for v in static):
        raise EqdslError.one(f"{path}: input {info.name!r} has the static shape {_dims_text(info)}, with a "
                             "dimension below 1; expected sizes ≥ 1 (give its shape with --shape "
                             f"{info.name}=D1,D2,... or `shapes:` to override)")
    if len(static) == len(dims) and math.prod(static) > MAX_ELEMENTS:
        raise EqdslError.one(f"{path}: input {info.name!r} has the shape {_dims_text(info)}: "
                             f"{math.prod(static):.3g} elements; expected at most {MAX_ELEMENTS:,} (2^31) "
                             f"(give a smaller shape with --shape {info.name}=D1,D2,... or `shapes:`)")


def _dims_text(info: onnx.ValueInfoProto) -> str:
    dims = info.type.tensor_type.shape.dim
    return "[" + ", ".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in dims) + "]"


def _inputs(path: Path, r: Reader, live: set[str], constants: Constants) -> None:
    """Graph inputs as program inputs (`typed_input` where not float32), or as the constants
    `constants` fixes them to; a non-float input the outputs do not need is left out (the export
    keeps it in the model's interface)."""
    graph = r.model.graph
    for init in graph.initializer:
        try:
            r.env[init.name] = tensor_array(init, "initializer")
        except NodeError as err:
            raise EqdslError.one(f"{path}: {err}") from None
    for info in graph.input:
        if info.name in r.env:
            continue
        dims = r.shapes.get(info.name)
        if dims is None:
            raise EqdslError.one(f"{path}: input {info.name!r} has a dynamic or unknown shape; eqdsl needs "
                                 "static shapes (fix them, e.g. with onnx.tools.update_model_dims)")
        kind = helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)
        if info.name in constants:
            r.env[info.name] = np.broadcast_to(np.asarray(constants[info.name], dtype=kind), dims).copy()
        elif kind != np.float32 and info.name in live:
            try:
                typed_dtype(np.dtype(kind).name)
            except EqdslError as err:
                raise EqdslError.one(f"{path}: input {info.name!r}: {err.diagnostics[0].message}") from None
            r.env[info.name] = r.g.op("typed_input", info.name, list(dims), np.dtype(kind).name)
        elif kind == np.float32:
            r.env[info.name] = r.g.input(info.name, list(dims))


def _handled(r: Reader, node: onnx.NodeProto, handler: Handler, attrs: dict) -> list[Value]:
    """The language's form of the node; where it has none for these attributes (AveragePool's
    explicit pads without count_include_pad, a dilated Conv), the node kept opaque, said in a note."""
    try:
        return handler(r, node, attrs)
    except NodeError as err:
        try:
            kept: list[Value] = [opaque_of(r, node)]
        except NodeError:
            raise err from None
        r.opaque_notes[(node.op_type, str(err))] = r.opaque_notes.get((node.op_type, str(err)), 0) + 1
        return kept


def _node(r: Reader, node: onnx.NodeProto) -> None:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
    handler = HANDLERS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
    outputs: list[Value | None] | None = _inlined(r, node) if node.op_type == "If" else None
    outputs = outputs if outputs is not None else cast(list[Value | None] | None, folded(r, node, handler is not None))
    if outputs is None:
        tensors = [n for n in node.input if isinstance(r.env.get(n), Tensor)]
        # other types flow only through opaque nodes (a Constant's value is whatever it holds)
        # an output nothing reads (Dropout's mask) does not count
        used_outputs = [o for o in node.output if o and r.used(o)]
        float_only = not tensors or all(r.dtype(n) == np.float32 for n in tensors + used_outputs)
        if handler and float_only:
            outputs = list(_handled(r, node, handler, attrs))
        else:
            outputs = list(opaque_outputs(r, node))
            why = "the language has no operator for it" if handler is None else "it computes on non-float tensors"
            r.opaque_notes[(node.op_type, why)] = r.opaque_notes.get((node.op_type, why), 0) + 1
    for name, value in zip(node.output, outputs):
        want = r.shapes.get(name)
        if isinstance(value, Tensor) and want is not None and value.dims != want:
            raise NodeError(f"imported as shape {list(value.dims)} but ONNX infers {list(want)} "
                            f"for {name!r} (an eqdsl bug: please report it)")
        if value is not None:
            r.env[name] = value


def _inlined(r: Reader, node: onnx.NodeProto) -> list[Value | None] | None:
    """An If whose condition is known at import (shape tests, with static shapes) as the nodes of
    the branch it takes; None when the condition depends on the program's inputs."""
    cond = r.env.get(node.input[0])
    if not isinstance(cond, np.ndarray):
        return None
    taken = "then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"
    branch = next(a.g for a in node.attribute if a.name == taken)
    for init in branch.initializer:
        r.env[init.name] = tensor_array(init, f"{taken} initializer")
    for k, sub in enumerate(branch.node):
        try:
            _node(r, sub)
        except NodeError as err:
            raise NodeError(f"in its {taken} (taken: the condition is known), node "
                            f"{sub.name or '#' + str(k)} ({sub.op_type}): {err}") from None
    return [r.env.get(o.name) for o in branch.output]


def _read_nodes(path: Path, r: Reader, live: list[onnx.NodeProto], outputs: list[str]) -> list[str]:
    """Every node in turn, a region of integer and boolean nodes (`eqdsl.onnx.regions`) as one
    opaque operator; the notes on the regions."""
    order, region_of = regions.plan(r, live, {name for name, v in r.env.items() if isinstance(v, Tensor)})
    readers: dict[str, list[onnx.NodeProto]] = {name: [_MODEL_OUTPUT] for name in outputs}
    for node in order:
        for name in read_names(node):
            readers.setdefault(name, []).append(node)
    carried: dict[int, int] = {}  # id of a region's first node → its size, for regions carried whole
    for k, node in enumerate(order):
        region = region_of.get(id(node))
        if region is not None and id(region[0]) in carried:
            continue
        try:
            made = regions.region_outputs(r, region, readers) if region is not None and region[0] is node else None
            if region is not None and made is not None:
                r.env.update(made)
                carried[id(node)] = len(region)
            else:  # a node of no region, or of one imported node by node
                _node(r, node)
        except (NodeError, EqdslError) as err:
            text = str(err) if isinstance(err, NodeError) else "; ".join(d.message for d in err.diagnostics)
            raise EqdslError.one(f"{path}: node {node.name or '#' + str(k)} ({node.op_type}): {text}") from None
    if not carried:
        return []
    return [f"{len(carried)} region(s) of integer and boolean nodes ({sum(carried.values())} nodes) each kept as "
            "one opaque operator (eqdsl.onnx.regions)"]


_MODEL_OUTPUT = onnx.NodeProto()  # reads the model's outputs, outside every region


def read_onnx(path: Path, lang: ir.Language, shapes: Shapes | None = None,
              constants: Constants | None = None) -> Imported:
    constants = constants or {}
    model, notes = _load(path, shapes or {}, set(constants))
    r = Reader(lang, model)
    live, read = needed_nodes(list(model.graph.node), [o.name for o in model.graph.output])
    _inputs(path, r, read, constants)
    notes += [f"input {name!r} fixed to {value} (constants): the optimized model ignores it"
              for name, value in constants.items()]
    notes += [f"input {n.args[0]!r} is {n.args[2]}: the operators it reaches stay opaque; validation draws it "
              "as 0s and 1s (`constants` fixes it to a value instead)" for n in r.g.nodes if n.op == "typed_input"]
    notes += _read_nodes(path, r, live, [o.name for o in model.graph.output])
    outputs = [o.name for o in model.graph.output]
    if not outputs:
        raise EqdslError.one(f"{path}: the model has no outputs")
    graph_name = model.graph.name  # bytes when the file's name is not UTF-8 (a damaged file)
    graph_name = graph_name.decode("utf-8", "replace") if isinstance(graph_name, bytes) else graph_name
    name = re.sub(r"\W", "_", graph_name or path.stem) or "model"
    name = name if name[0].isalpha() else f"m_{name}"
    try:
        roots = [r.tensor(o) for o in outputs]
    except NodeError as err:
        raise EqdslError.one(f"{path}: output: {err}") from None
    for o, root in zip(outputs, roots):
        if r.dtype(o) != np.float32 and r.g.nodes[root.index].op not in OPAQUE:
            raise EqdslError.one(f"{path}: output {o!r} is {r.dtype(o)}, and not computed by an operator eqdsl "
                                 "keeps opaque: eqdsl's operators compute float32")
    program = without_dead_nodes(r.g.program(name, roots))
    used = {str(n.args[0]) for n in program.nodes if n.op == "weight"}
    notes += [f"{n} {op} node(s) kept as opaque operators (the rules cannot see inside): {why}"
              for (op, why), n in sorted(r.opaque_notes.items(), key=lambda item: (-item[1], item[0]))]
    fixed = {name: cast(np.ndarray, r.env[name]) for name in constants}
    return Imported(program, {k: v for k, v in r.weights.items() if k in used}, tuple(outputs), tuple(notes), fixed)


# Operators ONNX Runtime removes before it runs a model (its basic graph optimizations)
REMOVED_AT_RUNTIME = frozenset({"Identity", "Dropout"})


def operator_counts(path: Path, runtime: bool = False) -> Counter[str]:
    """How many nodes of each operator type a model's main graph holds (`runtime`: without the
    ones ONNX Runtime removes before it runs it)."""
    counts = Counter(n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node)
    return counts - Counter({op: counts[op] for op in REMOVED_AT_RUNTIME}) if runtime else counts
