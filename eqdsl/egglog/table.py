"""One read of an e-graph state: every row of egglog's `freeze()` as a node table, primitives decoded.

Contract: `node_table(frozen, egraph, class_sorts)` lists the e-graph as egglog's `serialize()`
JSON would (the format `eqdsl extract` reads): the same node ids (`function-I-FN`, one per row
of function FN; `primitive-SORT-N` per primitive value), class ids (`SORT-N`) and order
(functions in declaration order, rows in table order, each primitive before the first row that
uses it, a vector's items before the vector), without building or parsing JSON text.
`EGraphSession` makes one per e-graph state and derives the cycle filter's and sampling's
`FrozenGraph` and the priced `LiveEGraph` from the same `freeze()`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from eqdsl.ir.evaluate import Value

SCALAR_SORTS = ("i64", "String", "bool")
IDS_KEPT = 1_000_000  # every other non-class sort holding values is a vector of i64


class TableRow(NamedTuple):  # a named tuple: one per row per read, three times faster to build
    id: str  # the node id egglog's JSON gives the row
    fn: str  # egglog function (a constructor, an analysis function, a relation) or the primitive's sort
    eclass: str  # class id; a primitive's is its own
    children: tuple[str, ...]  # class ids of the arguments, primitives included
    subsumed: bool


@dataclass(frozen=True)
class NodeTable:
    rows: tuple[TableRow, ...]
    values: dict[str, Value]  # primitive class id → its value


def node_table(frozen: Any, egraph: Any, class_sorts: frozenset[str], ids: dict[tuple[str, Any], str]) -> NodeTable:
    """`ids`: the caller's memo of class ids by (sort, raw value), kept across reads of one
    e-graph (an id is a function of the raw value; a primitive's decoded value is not kept)."""
    reader = _Reader(egraph, class_sorts, ids)
    rows = reader.rows
    for name, fn in frozen.functions.items():
        if name.startswith("$"):  # let-bound handles (`$hN`): not in the serialized e-graph
            continue
        sorts, out_sort = tuple(fn.input_sorts), fn.output_sort
        primitive = [s not in class_sorts for s in sorts]
        valued = out_sort in SCALAR_SORTS or _is_vector(out_sort, class_sorts)
        for i, row in enumerate(fn.rows):
            cells = [reader.cell(s, v) if p else ids.get((s, v)) or reader.class_id(s, v)
                     for s, v, p in zip(sorts, row.inputs, primitive)]
            out = reader.cell(out_sort, row.output) if valued else reader.class_id(out_sort, row.output)
            rows.append(TableRow(f"function-{i}-{name}", name, out, tuple(cells), row.subsumed))
    return NodeTable(tuple(rows), reader.values)


class _Reader:
    def __init__(self, egraph: Any, class_sorts: frozenset[str], ids: dict[tuple[str, Any], str]) -> None:
        self.egraph, self.class_sorts, self.ids = egraph, class_sorts, ids
        self.rows: list[TableRow] = []
        self.values: dict[str, Value] = {}

    def class_id(self, sort: str, raw: Any) -> str:
        cid = self.ids.get((sort, raw))
        if cid is None:
            if len(self.ids) >= IDS_KEPT:
                self.ids.clear()
            cid = self.ids[(sort, raw)] = f"{sort}-{_number(raw)}"
        return cid

    def cell(self, sort: str, raw: Any) -> str:
        """The class id of a primitive argument; its row is added the first time it is seen."""
        cid = self.class_id(sort, raw)
        if cid in self.values:
            return cid
        eg = self.egraph
        kids: tuple[str, ...] = ()
        value: Value
        match sort:
            case "i64":
                value = number = eg.value_to_i64(raw)
                op = str(number)
            case "String":
                value = text = eg.value_to_string(raw)
                op = _quoted(text)
            case "bool":
                value = bool(eg.value_to_bool(raw))
                op = "true" if value else "false"
            case _:
                items = eg.value_to_vec(raw)
                kids = tuple([self.cell("i64", v) for v in items])
                value = tuple(cast(int, self.values[k]) for k in kids)
                op = "vec-of" if items else "vec-empty"
        self.values[cid] = value
        self.rows.append(TableRow(f"primitive-{cid}", op, cid, kids, False))
        return cid


def _number(raw: Any) -> str:
    """`Value(12)` → `12`: the id egglog's JSON gives the value (per sort)."""
    text = str(raw)
    return text[6:-1] if text.startswith("Value(") else text


def _is_vector(sort: str, class_sorts: frozenset[str]) -> bool:
    return sort not in class_sorts and not sort.startswith("@") and sort not in SCALAR_SORTS and sort != "Unit"


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
