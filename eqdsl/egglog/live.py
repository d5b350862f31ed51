"""The live e-graph → `ExtractionProblem`, priced by the run's cost model
(`eqdsl.egglog.readback` turns a selection back into a program).

Contract: analysis rows and root markers are dropped; primitive leaves (ints, strings, vecs) stay
as cost-0 classes so programs can be rebuilt with their literal arguments. Nodes computable before
the program runs (`constant_classes`) cost 0; every other operator node becomes one request
`(op, args, out)` — its literal parameters, its children's shapes, its own shape — and the cost
model (`eqdsl.cost.model.CostModel`) prices them all in one call. This module only decodes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import cast

from eqdsl import ir
from eqdsl.cost.model import CostModel, Request
from eqdsl.diagnostics import EqdslError
from eqdsl.egglog.lower import Lowered
from eqdsl.extract.egraph import ExtractionProblem, build_problem
from eqdsl.ir.evaluate import Value


@dataclass(frozen=True)
class LiveEGraph:
    problem: ExtractionProblem
    values: dict[str, Value]  # primitive class id → its value
    shapes: dict[str, Value]  # operator class id → its shape (shaped sorts only)


def _decode_value(node_id: str, nodes: dict) -> Value:
    node = nodes[node_id]
    op = node["op"]
    if op == "vec-of":
        return tuple(cast(int, _decode_value(k, nodes)) for k in node["children"])  # [Int] is the only vec
    if op == "vec-empty":
        return ()
    if op.startswith('"'):
        return json.loads(op)
    if op in ("true", "false"):
        return op == "true"
    return int(op)


def live_problem(data: dict, lowered: Lowered, costs: CostModel) -> LiveEGraph:
    nodes = data["nodes"]
    lang = lowered.language
    roots: list[tuple[int, str]] = []
    shapes: dict[str, Value] = {}
    values: dict[str, Value] = {}
    decoded: dict[str, Value] = {}  # value class → its value
    rows = []
    value_nodes = {n["eclass"]: nid for nid, n in nodes.items() if _is_value(n["op"])}
    for nid, node in nodes.items():
        op, kids = node["op"], node["children"]
        if op in lowered.bookkeeping:
            continue
        if op in lowered.root_rels:
            roots.append((cast(int, _decode_value(kids[1], nodes)), nodes[kids[0]]["eclass"]))
        elif op in lowered.analysis_fns:  # many classes share one shape value: decode it once
            shape = decoded.get(node["eclass"])
            if shape is None:
                shape = decoded[node["eclass"]] = _decode_value(value_nodes[node["eclass"]], nodes)
            shapes[nodes[kids[0]]["eclass"]] = shape
        elif op in lowered.op_of_egg:
            rows.append([nid, lowered.op_of_egg[op], node["eclass"], kids, 0.0, node.get("subsumed", False)])
        else:
            values[node["eclass"]] = _decode_value(nid, nodes)
            rows.append([nid, op, node["eclass"], kids, 0.0, False])
    if not roots:
        raise EqdslError.one("the e-graph has no roots: load a program with at least one `root`")
    operands = _operands(lang, rows, nodes)
    constant = constant_classes(lang, rows, operands)
    running = [row for row, ops in zip(rows, operands) if row[1] in lang.ops and not _folded(lang, row, ops, constant)]
    requests = [_request(lang, row, nodes, values, shapes) for row in running]
    for row, cost in zip(running, costs.price(requests)):
        row[4] = cost
    problem = build_problem([tuple(r) for r in rows], [cid for _, cid in sorted(roots)])
    return LiveEGraph(problem, values, shapes)


_VALUE_OPS = ("vec-of", "vec-empty")


def _request(lang: ir.Language, row, nodes: dict, values: dict, shapes: dict) -> Request:
    """What the cost model sees of a node: its arguments (children's shapes — None where unknown —
    or literal values) in declared order and its own shape."""
    _, op_name, eclass, kids, _, _ = row
    classes = [nodes[kid]["eclass"] for kid in kids]
    args = tuple(shapes.get(c) if isinstance(param.type, ir.SortType) else values[c]
                 for param, c in zip(lang.ops[op_name].params, classes))
    return op_name, args, shapes.get(eclass)


def _operands(lang: ir.Language, rows, nodes: dict) -> list[list[str]]:
    """Per row, the classes of its operands of a user sort (an operator's parameters are not
    operands); none for a row that is not an operator's."""
    positions = {name: [isinstance(p.type, ir.SortType) for p in op.params] for name, op in lang.ops.items()}
    return [[nodes[kid]["eclass"] for kid, is_operand in zip(row[3], positions[row[1]]) if is_operand]
            if row[1] in positions else [] for row in rows]


def constant_classes(lang: ir.Language, rows, operands: list[list[str]]) -> set[str]:
    """Classes computable before the program runs: a `const` operator's, or any class with a node
    whose operands (`_operands`) are all constant (TENSAT/TASO fold such subgraphs at inference
    time). One pass: each row waits on its operand classes and is counted down as they become
    constant."""
    known: list[str] = []  # classes found constant, not yet propagated
    waiting: dict[str, list[int]] = {}  # operand class → rows that need it
    missing: dict[int, int] = {}  # row → operand classes not yet known constant
    for k, row in enumerate(rows):
        if row[1] not in lang.ops:
            continue
        distinct = set(operands[k])
        if lang.ops[row[1]].const:
            known.append(row[2])
        elif distinct:
            missing[k] = len(distinct)
            for c in distinct:
                waiting.setdefault(c, []).append(k)
    constant: set[str] = set()
    while known:
        c = known.pop()
        if c in constant:
            continue
        constant.add(c)
        for k in waiting.get(c, ()):
            missing[k] -= 1
            if missing[k] == 0:
                known.append(rows[k][2])
    return constant


def _folded(lang: ir.Language, row, operands: list[str], constant: set[str]) -> bool:
    if row[1] not in lang.ops or lang.ops[row[1]].const:
        return False
    return bool(operands) and all(c in constant for c in operands)


def _is_value(op: str) -> bool:
    return op in _VALUE_OPS or op in ("true", "false") or op.startswith('"') or op.lstrip("-").isdigit()
