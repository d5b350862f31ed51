"""The tensor language's operators as one table: an `OpSpec` per operator, its interpretations
side by side (JAX's `lax` primitives are the model).

The operator's signature, shape rule and cost rule are its declaration in `rulesets/tensor.eqr`;
everything that runs it is here: its reference semantics (NumPy; `eqdsl verify`, folding and the
executor's fallback), how ONNX operators import to it, how it exports to ONNX, its CPU and CUDA
kernels, and whether measuring backends time it. The drivers (`eqdsl.onnx.read` / `.write`,
`eqdsl.kernels.cpu` / `.cuda`, `eqdsl.execute.backends`) walk this table and never name an
operator themselves.

An interpretation the drivers build is a `Form`: the name of a family of code in that driver (its
`FAMILIES` table: `unary` kernels, `simple` ONNX nodes, ...) with the family's parameters. The
driver calls `FAMILIES[form.family](op_name, **form.kwargs)`: parameters are named (`pool`'s
`kind="max"` imports a MaxPool, its export's `onnx_type="MaxPool"`, its kernel's `is_max=True`).
Data rather than functions, because the drivers sit above this layer (the ONNX and Numba imports
are theirs, made only when used).

Contract: `OPS` lists one `OpSpec` per operator of `tensor.eqr`, in its order (tests/test_ops.py
checks both ways); `SPECS` maps names to them. `None` for a kernel or an export form says the
operator has none (the executor then runs the reference semantics; the exporter refuses it
unless it is folded as a constant).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypedDict

import numpy as np

from eqdsl.languages.base import External, Leaf, OpSemantics
from eqdsl.languages.tensor import opaque
from eqdsl.languages.tensor import reference as ref


@dataclass(frozen=True)
class Form:
    """One interpretation: `family` names code in a driver's FAMILIES; `params` are its arguments
    after the operator's name."""

    family: str
    params: tuple[tuple[str, Any], ...] = ()  # (name, value): the family's keyword arguments

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.params)


def form(family: str, **params: Any) -> Form:
    return Form(family, tuple(params.items()))


def fixed(code: Any) -> Callable[..., Any]:
    """A driver's family of one piece of code, the same for every operator that names it."""
    return lambda op: code


@dataclass(frozen=True)
class OpSpec:
    name: str
    reference: OpSemantics                         # NumPy semantics (a Leaf: an input drawn at random)
    onnx_in: tuple[tuple[str, Form], ...] = ()     # (ONNX op_type, import form)
    onnx_out: Form | None = None                   # the ONNX nodes it exports as
    cpu: Form | None = None                        # Numba CPU kernel
    cuda: Form | None = None                       # Numba CUDA kernel
    view: bool = False                             # relabels memory: the executor runs `reference` in place
    timed: bool = True                             # False: leaves, roots, free views (measuring skips them)
    parts: tuple[str, ...] = ()                    # a result of several tensors: the operators taking each
    act: int | None = None                         # the activation it is (`codes.Act`), as a matmul fuses it
    positive: tuple[int, ...] = ()                 # arguments whose weights must be positive (a variance)
    min_opset: int | None = None                   # the lowest ONNX opset its export form needs


class _Kernels(TypedDict):
    cpu: Form | None
    cuda: Form | None


def _kernels(family: str, **params: Any) -> _Kernels:
    """The same kernel family on both devices."""
    return {"cpu": form(family, **params), "cuda": form(family, **params)}


def _act(code: int, onnx: str, name: str) -> OpSpec:
    return OpSpec(name, ref.ACTIVATIONS[code], ((onnx, form("unary")),), form("simple", onnx_type=onnx),
                  **_kernels("unary", code=code), act=code)


def _concat(name: str) -> OpSpec:
    return OpSpec(name, ref.concat, (("Concat", form("join")),) if name == "concat" else (),
                  form("join"), **_kernels("layout", planner="join"))


def _opaque(name: str) -> OpSpec:
    return OpSpec(name, External(opaque.evaluate, "ONNX"), (), form("opaque"))


OPS: tuple[OpSpec, ...] = (
    OpSpec("input", Leaf(lambda id_, dims: tuple(dims)), timed=False),
    OpSpec("typed_input", Leaf(lambda id_, dims, dtype: tuple(dims), ref.typed_values), timed=False),
    OpSpec("weight", Leaf(lambda id_, dims: tuple(dims)), (("Constant", form("constant")),), timed=False),
    OpSpec("ewadd", lambda a, b: a + b, (("Add", form("commutative")), ("Sub", form("sub")), ("Sum", form("variadic"))),
           form("simple", onnx_type="Add"), **_kernels("binary", code=0)),
    OpSpec("ewmul", lambda a, b: a * b, (("Mul", form("commutative")), ("Div", form("div"))),
           form("simple", onnx_type="Mul"), **_kernels("binary", code=1)),
    OpSpec("smul", lambda x, s: x * s.reshape(()), (), form("simple", onnx_type="Mul")),
    _act(2, "Relu", "relu"),
    _act(3, "Tanh", "tanh"),
    _act(1, "Sigmoid", "sigmoid"),
    OpSpec("matmul", lambda act, a, b: ref.ACTIVATIONS[act](a @ b),
           (("MatMul", form("product")), ("Gemm", form("gemm"))), form("product"), **_kernels("product")),
    OpSpec("conv2d", ref.conv2d, (("Conv", form("conv")),), form("conv"), **_kernels("convolution")),
    OpSpec("dconv2d", ref.dconv2d, (), form("dilated_conv")),  # imported by conv's form; runs its reference
    OpSpec("poolmax", ref.poolmax,
           (("MaxPool", form("pool", kind="max")), ("GlobalMaxPool", form("global_pool", kind="max"))),
           form("pool", onnx_type="MaxPool"),
           **_kernels("pool", is_max=True)),
    OpSpec("poolavg", ref.poolavg,
           (("AveragePool", form("pool", kind="avg")), ("GlobalAveragePool", form("global_pool", kind="avg"))),
           form("pool", onnx_type="AveragePool"), **_kernels("pool", is_max=False)),
    OpSpec("transpose", lambda x, perm: np.transpose(x, perm), (("Transpose", form("permute")),),
           form("permute"), **_kernels("layout", planner="permute")),
    OpSpec("enlarge", ref.enlarge, (), None, **_kernels("layout", planner="centre")),
    OpSpec("merge", ref.merge, (), None, **_kernels("layout", planner="regroup")),
    _concat("concat"), _concat("concat3"), _concat("concat4"), _concat("concat5"),
    OpSpec("split", ref.split, (("Split", form("cut")),), form("cut"), **_kernels("layout", planner="cut"),
           parts=("split0", "split1")),
    OpSpec("split0", lambda t: t[0], (), form("part", k=0), view=True, timed=False),
    OpSpec("split1", lambda t: t[1], (), form("part", k=1), view=True, timed=False),
    OpSpec("reshape", ref.reshape, (("Reshape", form("view")), ("Flatten", form("flatten"))),
           form("view"), view=True),
    OpSpec("batchnorm", ref.batchnorm, (("BatchNormalization", form("normalize")),), form("normalize"),
           **_kernels("normalize"), positive=(1, 4)),  # batchnorm(x, scale, bias, mean, var)
    OpSpec("dropout", lambda x: x, (("Dropout", form("alias")), ("Identity", form("alias"))), form("alias"),
           view=True, timed=False),
    OpSpec("noop", lambda a, b: (a, b), timed=False),
    OpSpec("pad2d", ref.pad, (), form("pad"), **_kernels("layout", planner="pad")),
    *(_opaque(f"opaque{n}") for n in range(1, opaque.MAX_INPUTS + 1)),
    OpSpec("scalar", ref.scalar, timed=False),
    OpSpec("clip", ref.clip, (("Clip", form("clamp")),), form("simple", onnx_type="Clip"), cpu=None, cuda=None),
    OpSpec("hardswish", ref.hardswish, (("HardSwish", form("unary")),), form("simple", onnx_type="HardSwish"),
           **_kernels("pointwise", element=ref.hardswish_element), min_opset=14),
    OpSpec("layernorm", ref.layernorm,
           (("LayerNormalization", form("plain", attrs=(("axis", -1), ("epsilon", 1e-5), ("stash_type", 1)))),),
           form("simple", onnx_type="LayerNormalization"), min_opset=17),
    OpSpec("bnscale", ref.bnscale),  # of weights only: folded before export and execution
    OpSpec("bnshift", ref.bnshift),
    OpSpec("lrn", ref.lrn, (("LRN", form("lrn")),), form("lrn")),
    OpSpec("lrnscale", ref.lrn_scale, (), form("lrn_scale")),
)

SPECS: dict[str, OpSpec] = {spec.name: spec for spec in OPS}
# a program's leaves, constants and root tuple: the structure every driver walks, so each names them
STRUCTURE = frozenset({"input", "typed_input", "weight", "scalar", "noop"})
INPUTS = frozenset({"input", "typed_input"})  # a program's inputs: (id, dims) first, a typed one's dtype after
OPAQUE = frozenset(spec.name for spec in OPS if spec.onnx_out == form("opaque"))  # ONNX operators carried as they are
SEMANTICS: dict[str, OpSemantics] = {spec.name: spec.reference for spec in OPS}
