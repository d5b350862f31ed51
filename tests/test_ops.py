"""The tensor language's operator table (`eqdsl.languages.tensor.ops`): one `OpSpec` per operator
of `rulesets/tensor.eqr`, and every interpretation it names built by its driver."""
from __future__ import annotations

import inspect

import pytest

from eqdsl.frontend.load import load_language
from eqdsl.languages.base import External, Leaf
from eqdsl.languages.tensor.ops import OPS, SPECS

from conftest import ROOT

TENSOR = load_language("tensor")


def test_one_spec_per_declared_operator_in_order():
    assert [s.name for s in OPS] == list(TENSOR.ops)


@pytest.mark.parametrize("spec", OPS, ids=lambda s: s.name)
def test_reference_takes_the_declared_arguments(spec):
    fn = spec.reference.fn if isinstance(spec.reference, External) else spec.reference
    fn = fn.shape if isinstance(fn, Leaf) else fn
    params = TENSOR.ops[spec.name].params
    inspect.signature(fn).bind(*(None for _ in params))


def test_onnx_forms_are_built_from_the_table():
    pytest.importorskip("onnx")
    from eqdsl.onnx.read import HANDLERS
    from eqdsl.onnx.write import EMITTERS

    assert set(EMITTERS) == {s.name for s in OPS if s.onnx_out is not None}
    assert set(HANDLERS) == {op_type for s in OPS for op_type, _ in s.onnx_in}
    imported = [op_type for s in OPS for op_type, _ in s.onnx_in]
    assert len(imported) == len(set(imported)), "an ONNX operator imports to one tensor operator"


def test_kernels_are_built_from_the_table():
    from eqdsl.kernels.cpu import RUNNERS

    assert set(RUNNERS) == {s.name for s in OPS if s.cpu is not None}
    assert not any(s.view and (s.cpu or s.cuda) for s in OPS), "views run as their reference, never a kernel"


def test_cuda_kernels_are_built_from_the_table():
    from eqdsl.kernels.cuda import LAUNCHERS

    assert set(LAUNCHERS) == {s.name for s in OPS if s.cuda is not None}


def test_the_measurer_skips_what_the_table_says_costs_nothing():
    from eqdsl.execute.backends import OrtBackend

    not_timed = {s.name for s in OPS if not s.timed}
    assert not_timed == {"input", "typed_input", "weight", "noop", "dropout", "split0", "split1", "scalar"}
    assert not any(OrtBackend().supports(op) for op in not_timed) and OrtBackend().supports("hardswish")
    assert SPECS["reshape"].view and SPECS["reshape"].timed  # ONNX Runtime's Reshape copies: timed there


def test_an_operator_with_a_scalar_operand_is_timed():
    """A 0-d operand (`scalar(3, 1)` in hard-swish written out) is a 0-d input of the one-operator
    model: fed as a 0-d array, not a NumPy scalar, which ONNX Runtime refuses (PP-OCR under
    `measure: ort` ended in a traceback)."""
    from eqdsl.execute.backends import OrtBackend
    from eqdsl.frontend import load_language

    assert OrtBackend().time_ns(load_language("tensat"), "ewadd", ((1, 8, 4, 4), ()), 3) > 0


# the generic drivers: they walk the table. The forms (`onnx/import_forms.py`, `export_forms.py`)
# are family code (a Gemm imports as a matmul plus an ewadd) and may name what they build.
DRIVERS = [p for d in ("kernels", "execute", "onnx") for p in sorted((ROOT / "eqdsl" / d).glob("*.py"))
           if p.name not in ("import_forms.py", "export_forms.py")]


def test_no_driver_names_an_operator_outside_the_table():
    """Planners, fused activations, opsets, weight facts, multi-output parts: the table's fields,
    not names in a driver. A program's structure (leaves, the root tuple) is every driver's own."""
    import ast

    from eqdsl.languages.tensor.ops import STRUCTURE

    named = {spec.name for spec in OPS} - STRUCTURE
    found = [f"{p.relative_to(ROOT)}:{n.lineno}: {n.value!r}" for p in DRIVERS for n in ast.walk(ast.parse(p.read_text()))
             if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in named]
    assert len(DRIVERS) > 15 and found == []
