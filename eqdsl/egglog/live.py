"""The live e-graph → `ExtractionProblem` with costs from the language's `cost` rules
(`eqdsl.egglog.readback` turns a selection back into a program).

Contract: analysis rows and root markers are dropped; primitive leaves (ints, strings, vecs) stay
as cost-0 classes so programs can be rebuilt with their literal arguments. Each operator node's
cost is its cost rule evaluated on its parameters, its children's shapes and its own shape
(`out`); a cost rule that fails on some node is an `EqdslError` naming the rule.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, cast

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.egglog.lower import Lowered
from eqdsl.extract.egraph import ExtractionProblem, build_problem
from eqdsl.ir.evaluate import EvalError, Value, evaluate


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


# Measured costs (eqdsl.execute.measure): given (op, args, output shape) requests, nanoseconds per
# request, or None where the cost rule should price the node.
Measure = Callable[[list[tuple[str, tuple[Any, ...], Any]]], list[float | None]]


def live_problem(data: dict, lowered: Lowered, params: dict[str, int] | None = None,
                 measure: Measure | None = None) -> LiveEGraph:
    """`params`: the target values the cost rules read (`eqdsl.cost.targets.bind_target`);
    `measure`: measured costs for the nodes that run (folded ones cost 0 and are not timed)."""
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
    measured = _measured(lang, running, nodes, values, shapes, measure) if measure else [None] * len(running)
    for row, cost in zip(running, measured):
        row[4] = cost if cost is not None else _node_cost(lang, row, nodes, values, shapes, params or {})
    problem = build_problem([tuple(r) for r in rows], [cid for _, cid in sorted(roots)])
    return LiveEGraph(problem, values, shapes)


_VALUE_OPS = ("vec-of", "vec-empty")


def _measured(lang: ir.Language, rows, nodes: dict, values: dict, shapes: dict, measure: Measure) -> list[float | None]:
    """Measured costs of `rows` (None for a node with an unknown operand shape: its rule prices it)."""
    requests, where = [], []
    for k, (_, op_name, eclass, kids, _, _) in enumerate(rows):
        args = []
        for param, kid in zip(lang.ops[op_name].params, kids):
            kid_class = nodes[kid]["eclass"]
            args.append(shapes.get(kid_class) if isinstance(param.type, ir.SortType) else values[kid_class])
        if all(a is not None for a in args):
            requests.append((op_name, tuple(args), shapes.get(eclass)))
            where.append(k)
    costs: list[float | None] = [None] * len(rows)
    for k, cost in zip(where, measure(requests)):
        costs[k] = cost
    return costs


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


def _node_cost(lang: ir.Language, row, nodes: dict, values: dict, shapes: dict,
               params: dict[str, int]) -> float:
    _, op_name, eclass, kids, _, _ = row
    rule, op = lang.costs[op_name], lang.ops[op_name]
    if rule.constant is not None:
        return rule.constant
    env: dict[str, Any] = dict(params)  # an operand without a shape is None: the rule's error names it
    for name, param, kid in zip(rule.params, op.params, kids):
        kid_class = nodes[kid]["eclass"]
        env[name] = shapes.get(kid_class) if isinstance(param.type, ir.SortType) else values[kid_class]
    if eclass in shapes:
        env["out"] = shapes[eclass]
    key = (id(rule), tuple(env.items()))  # values are decoded as tuples, never lists: hashable
    cached = _COSTS.get(key)
    if cached is not None:  # the same configuration recurs in every state of a search, and across nodes
        return cached[1]
    try:
        cost = evaluate(rule.body, env)
    except (EvalError, KeyError, TypeError) as err:
        raise EqdslError.one(f"cost rule of '{op_name}' failed on a node with {env}: {err}",
                             rule.span) from None
    if not isinstance(cost, (int, float)) or cost < 0:
        raise EqdslError.one(f"cost rule of '{op_name}' gave {cost!r} for {env}; expected a number ≥ 0",
                             rule.span)
    if len(_COSTS) > COST_CACHE_SIZE:
        _COSTS.clear()
    _COSTS[key] = (rule, float(cost))
    return float(cost)


# Cost-rule results by (rule identity, its environment: ints, strings and tuples). Each entry
# holds its rule, so no other object can take that rule's id while the entry exists.
_COSTS: dict[tuple[int, tuple], tuple[Any, float]] = {}
COST_CACHE_SIZE = 500_000
