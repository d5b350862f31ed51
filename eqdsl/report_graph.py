"""The report page's program graphs: the input and optimized programs, diffed by matched node,
drawn as inline SVG that fits the page's width.

Contract: `diff(input, optimized)` colours each node of both programs (report.json's program form:
`nodes` with `op` and `args`, a child written `{"node": i}`, and `roots`): `SAME` where the other
program has the same term; `KEPT` where the node was matched from the roots down (the same
operator and literal arguments in the same place) but an operand below it changed; `GONE` (input)
or `NEW` (optimized) for the rewritten region. `svg(program, colours, facts)` draws one program.
A program of more than `FOLD_LEAVES_OVER` nodes (a smaller one is drawn node by node) has its
leaves (weights, inputs, constants) and the free private subterms over them (cost 0: computed
before the program runs) folded into their consumers' tooltips, and its chains (a node whose one
drawn operand is used by it alone, in the same colour) drawn as one box. Boxes are layered by
depth, ordered under their operands, labelled to fit (`LABEL_CHARS`), with every node's full text,
shape and cost in the box's tooltip (`<title>`). Up to `MAX_DRAWN` boxes are drawn; the SVG scales
to the page's width, and a checkbox beside it shows it at full size (CSS only: no script).
"""
from __future__ import annotations

import html
import json
from dataclasses import dataclass

from eqdsl.graphs import children_first

MAX_DRAWN = 6000  # boxes; above it the graph is listed, not drawn
FOLD_LEAVES_OVER = 60  # nodes: smaller programs are drawn whole
LABEL_CHARS = 20  # what fits a box at the page's font: 11 px sans-serif, at most 7.5 px a character
BOX_W, BOX_H, GAP_X, GAP_Y = 150, 18, 16, 32
NEW, GONE, SAME, KEPT = "#e4572e", "#8d99ae", "#17bebb", "#7fb8b7"
KEY = ((SAME, "in both programs"), (KEPT, "kept, an operand below changed"), (GONE, "only in the input"),
       (NEW, "only in the optimized program"))


def terms(program: dict, table: dict[tuple, int]) -> list[int]:
    """Each node's term as a number from `table` (hash-consing): equal terms, equal numbers, across
    the programs that share `table`. Flat keys: linear in the program, at any depth."""
    keys: list[int] = []
    for node in program["nodes"]:
        args = tuple(keys[a["node"]] if isinstance(a, dict) else json.dumps(a) for a in node["args"])
        keys.append(table.setdefault((node["op"], args), len(table)))
    return keys


def diff(input_: dict, optimized: dict) -> tuple[list[str], list[str]]:
    table: dict[tuple, int] = {}
    a_terms, b_terms = terms(input_, table), terms(optimized, table)
    shared = set(a_terms) & set(b_terms)
    a = [SAME if t in shared else GONE for t in a_terms]
    b = [SAME if t in shared else NEW for t in b_terms]
    pairs = list(zip(input_["roots"], optimized["roots"]))
    seen: set[tuple[int, int]] = set()
    while pairs:
        i, j = pairs.pop()
        if (i, j) in seen or a[i] == SAME:
            continue
        seen.add((i, j))
        x, y = input_["nodes"][i], optimized["nodes"][j]
        if not _same_place(x, y):
            continue
        a[i] = b[j] = KEPT
        pairs += [(p["node"], q["node"]) for p, q in zip(x["args"], y["args"]) if isinstance(p, dict)]
    return a, b


def _same_place(x: dict, y: dict) -> bool:
    """The same operator with the same literal arguments and operands in the same positions."""
    return x["op"] == y["op"] and len(x["args"]) == len(y["args"]) and all(
        isinstance(p, dict) == isinstance(q, dict) and (isinstance(p, dict) or p == q)
        for p, q in zip(x["args"], y["args"]))


def label(node: dict) -> str:
    literals = [json.dumps(a) for a in node["args"] if not isinstance(a, dict)]
    return node["op"] + (f"({', '.join(literals)})" if literals else "")


def _fit(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…"


@dataclass
class _Box:
    members: list[int]  # node indices, the top of a chain first
    colour: str
    depth: int = 0
    x: float = 0.0


def svg(program: dict, colours: list[str], facts: list[dict] | None = None, name: str = "g") -> str:
    """One program's graph (see the module contract); `facts`: per node `shape` and `cost`, if known."""
    nodes = program["nodes"]
    kids = [[a["node"] for a in n["args"] if isinstance(a, dict)] for n in nodes]
    order = children_first(program["roots"], lambda i: kids[i])
    folded = _folded(program, kids, order, facts)
    boxes, box_of = _boxes(kids, order, folded, colours, chains=len(nodes) > FOLD_LEAVES_OVER)
    if len(boxes) > MAX_DRAWN:
        return f"<p>not drawn: {len(boxes)} boxes (more than {MAX_DRAWN}); the table below compares operators</p>"
    rows = _layout(boxes, box_of, kids, folded)
    width = max((len(r) for r in rows), default=1) * (BOX_W + GAP_X) + GAP_X
    height = len(rows) * (BOX_H + GAP_Y) + GAP_Y
    top = len(rows) - 1
    at = {id(b): (b.x, GAP_Y + (top - b.depth) * (BOX_H + GAP_Y)) for b in boxes}
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}' width='{width}' "
             f"height='{height}' font-size='11'>"]
    for b in boxes:
        x1, y1 = at[id(b)]
        for k in {id(box_of[c]) for m in b.members for c in kids[m] if c in box_of and box_of[c] is not b}:
            x2, y2 = at[k]
            parts.append(f"<line x1='{x1 + BOX_W / 2}' y1='{y1 + BOX_H}' x2='{x2 + BOX_W / 2}' y2='{y2}' "
                         "stroke='#bbb'/>")
    roots = set(program["roots"])
    for b in boxes:
        x, y = at[id(b)]
        edge = " stroke='#222' stroke-width='2'" if b.members[0] in roots else ""
        title = html.escape(_tooltip(b, nodes, kids, folded, facts))
        parts.append(f"<g><title>{title}</title><rect x='{x}' y='{y}' width='{BOX_W}' height='{BOX_H}' rx='4' "
                     f"fill='{b.colour}'{edge}/><text x='{x + BOX_W / 2}' y='{y + 13}' text-anchor='middle' "
                     f"fill='white'>{html.escape(_box_label(b, nodes))}</text></g>")
    return (f"<input type=checkbox id='full-{name}' class=zoom><label for='full-{name}'> full size</label>"
            f"<div class=graph>" + "".join(parts) + "</svg></div>")


def _folded(program: dict, kids: list[list[int]], order: list[int], facts: list[dict] | None) -> set[int]:
    """What is drawn inside its consumer's tooltip instead of as a box, in a program of more than
    `FOLD_LEAVES_OVER` nodes: every leaf (weights, inputs, constants) and every node over folded
    operands alone that one node uses and that costs nothing (a weight reshaped before the
    program runs; `facts` say which); never a root."""
    if len(program["nodes"]) <= FOLD_LEAVES_OVER:
        return set()
    users: dict[int, int] = {}
    for i in order:
        for k in set(kids[i]):
            users[k] = users.get(k, 0) + 1
    roots = set(program["roots"])
    folded: set[int] = set()
    for i in order:  # children first
        free = facts is not None and facts[i].get("cost") == 0
        if i not in roots and (not kids[i] or (free and users.get(i) == 1 and all(k in folded for k in kids[i]))):
            folded.add(i)
    return folded


def _boxes(kids: list[list[int]], order: list[int], folded: set[int], colours: list[str], chains: bool):
    """One box per drawn node; with `chains`, a node whose single drawn operand has no other drawn
    user, in its colour, joins that operand's box."""
    users: dict[int, int] = {}
    for i in order:
        if i not in folded:
            for k in set(kids[i]) - folded:
                users[k] = users.get(k, 0) + 1
    box_of: dict[int, _Box] = {}
    boxes: list[_Box] = []
    for i in order:  # children first: a chain's lower part exists when its top is reached
        if i in folded:
            continue
        drawn = [k for k in set(kids[i]) if k not in folded]
        if chains and len(drawn) == 1 and users.get(drawn[0]) == 1 and box_of[drawn[0]].colour == colours[i]:
            box = box_of[drawn[0]]
            box.members.insert(0, i)
        else:
            box = _Box([i], colours[i])
            boxes.append(box)
        box_of[i] = box
    return boxes, box_of


def _layout(boxes: list[_Box], box_of: dict[int, _Box], kids: list[list[int]], folded: set[int]) -> list[list[_Box]]:
    """Layers by depth (a box above its operands), each box near the mean place of its operands."""
    below = {id(b): {id(box_of[c]) for m in b.members for c in kids[m] if c not in folded and box_of[c] is not b}
             for b in boxes}
    by_id = {id(b): b for b in boxes}
    for b in boxes:  # children first: operands' boxes have their depth already
        b.depth = 1 + max((by_id[k].depth for k in below[id(b)]), default=-1)
    rows: list[list[_Box]] = [[] for _ in range(1 + max((b.depth for b in boxes), default=0))]
    for b in boxes:
        rows[b.depth].append(b)
    for row in rows:
        wanted = {id(b): sum(by_id[k].x for k in below[id(b)]) / len(below[id(b)]) if below[id(b)] else 0.0
                  for b in row}
        row.sort(key=lambda b: wanted[id(b)])
        for slot, b in enumerate(row):
            b.x = GAP_X + slot * (BOX_W + GAP_X)
    return rows


def _box_label(b: _Box, nodes: list[dict]) -> str:
    if len(b.members) == 1:
        return _fit(label(nodes[b.members[0]]))
    first, last, count = nodes[b.members[-1]]["op"], nodes[b.members[0]]["op"], f" ({len(b.members)})"
    room = max(3, (LABEL_CHARS - len(count) - 1) // 2)  # the count always shows; long names are cut
    if len(first) + len(last) + 1 + len(count) > LABEL_CHARS:
        first, last = first[:room], last[:room]
    return _fit(f"{first}…{last}{count}")


def _tooltip(b: _Box, nodes: list[dict], kids: list[list[int]], folded: set[int], facts: list[dict] | None) -> str:
    lines = []
    for m in b.members:
        fact = facts[m] if facts is not None and m < len(facts) else {}
        shape = f" : {fact['shape']}" if fact.get("shape") is not None else ""
        cost = f", cost {fact['cost']:.4g}" if isinstance(fact.get("cost"), (int, float)) else ""
        lines.append(f"#{m} {label(nodes[m])}{shape}{cost}")
        lines += [f"    operand #{k} {_folded_text(k, nodes, kids, folded)}" for k in kids[m] if k in folded]
    return "\n".join(lines)


def _folded_text(k: int, nodes: list[dict], kids: list[list[int]], folded: set[int], depth: int = 0) -> str:
    """A folded operand as a term (its own folded operands inside, a few levels deep)."""
    inner = [_folded_text(c, nodes, kids, folded, depth + 1) if depth < 3 else "…" for c in kids[k] if c in folded]
    return label(nodes[k]) + (f"[{', '.join(inner)}]" if inner else "")
