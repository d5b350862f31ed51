"""The live e-graph (its `NodeTable`, `eqdsl.egglog.table`) → `ExtractionProblem`, priced by the
run's cost model (`eqdsl.egglog.readback` turns a selection back into a program).

Contract: analysis rows and root markers are dropped; primitive leaves (ints, strings, vecs) stay
as cost-0 classes so programs can be rebuilt with their literal arguments. Nodes computable before
the program runs (`constant_classes`) cost 0; every other operator node becomes one request
`(op, args, out, facts)` — its literal parameters, its children's shapes, its own shape, the
analysis values its cost rule reads — and the cost model (`eqdsl.cost.model.CostModel`) prices
them all in one call. This module only decodes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from eqdsl import ir
from eqdsl.cost.model import CostModel, Request, cost_reads
from eqdsl.diagnostics import EqdslError
from eqdsl.egglog.lower import Lowered
from eqdsl.egglog.table import NodeTable
from eqdsl.extract.egraph import ExtractionProblem, build_problem
from eqdsl.ir.evaluate import Value


@dataclass(frozen=True)
class LiveEGraph:
    problem: ExtractionProblem
    values: dict[str, Value]  # primitive class id → its value
    shapes: dict[str, Value]  # operator class id → its shape (shaped sorts only)


def live_problem(table: NodeTable, lowered: Lowered, costs: CostModel) -> LiveEGraph:
    lang = lowered.language
    roots: list[tuple[int, str]] = []
    shapes: dict[str, Value] = {}
    facts: dict[tuple[str, str], Value] = {}  # (analysis, class id) → its value where set
    rows: list[list[Any]] = []
    for r in table.rows:
        if r.fn in lowered.analyses:
            facts[lowered.analyses[r.fn], r.children[0]] = table.values[r.eclass]
        if r.fn in lowered.bookkeeping:
            continue
        if r.fn in lowered.root_rels:
            roots.append((cast(int, table.values[r.children[1]]), r.children[0]))
        elif r.fn in lowered.analysis_fns:
            shapes[r.children[0]] = table.values[r.eclass]
        elif r.fn in lowered.op_of_egg:
            rows.append([r.id, lowered.op_of_egg[r.fn], r.eclass, r.children, 0.0, r.subsumed])
        else:  # a primitive value
            rows.append([r.id, r.fn, r.eclass, r.children, 0.0, False])
    if not roots:
        raise EqdslError.one("the e-graph has no roots: load a program with at least one `root`")
    operands = _operands(lang, rows)
    constant = constant_classes(lang, rows, operands)
    running = [row for row, ops in zip(rows, operands) if row[1] in lang.ops and not _folded(lang, row, ops, constant)]
    reads = {op: cost_reads(rule) for op, rule in lang.costs.items()}
    requests = [_with_facts(lang, _request(lang, row, table.values, shapes), row, reads.get(row[1], ()), facts)
                for row in running]
    for row, cost in zip(running, costs.price(requests)):
        row[4] = cost
    problem = build_problem([(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows], [cid for _, cid in sorted(roots)],
                            children_are_classes=True)
    return LiveEGraph(problem, table.values, shapes)


def _request(lang: ir.Language, row, values: dict, shapes: dict) -> Request:
    """What the cost model sees of a node: its arguments (children's shapes — None where unknown —
    or literal values) in declared order and its own shape."""
    _, op_name, eclass, classes, _, _ = row
    args = tuple(shapes.get(c) if isinstance(param.type, ir.SortType) else values[c]
                 for param, c in zip(lang.ops[op_name].params, classes))
    return Request(op_name, args, shapes.get(eclass))


def _with_facts(lang: ir.Language, request: Request, row, reads: tuple[ir.AnalysisOf, ...], facts: dict) -> Request:
    """`request` with the analysis values its cost rule reads: of an operand's class by the rule's
    name for it (a `PVar`, `frontend.check.costs`), or of the node's own (`out`)."""
    if not reads:
        return request
    _, op_name, eclass, classes, _, _ = row
    class_of = dict(zip(lang.costs[op_name].params, classes)) | {"out": eclass}
    return request._replace(facts=tuple(facts.get((read.analysis, class_of[cast(ir.PVar, read.pattern).name]))
                                        for read in reads))


def _operands(lang: ir.Language, rows) -> list[list[str]]:
    """Per row, the classes of its operands of a user sort (an operator's parameters are not
    operands); none for a row that is not an operator's."""
    positions = {name: [isinstance(p.type, ir.SortType) for p in op.params] for name, op in lang.ops.items()}
    return [[c for c, is_operand in zip(row[3], positions[row[1]]) if is_operand]
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
