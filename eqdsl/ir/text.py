"""IR as `.eqr` text: a program (what `eqdsl import onnx` writes) and a rule pattern.

Contract: `program_text(program)` is a `program NAME:` block that `load_program_text` reads back to
the same nodes: every operator node that has operator children, or is used more than once,
becomes a `let tN`; leaves and other single-use nodes are written inline.
"""
from __future__ import annotations

import json
from typing import assert_never

from eqdsl import ir


def literal(value: int | str | bool | tuple[int, ...]) -> str:
    match value:
        case bool():
            return "true" if value else "false"
        case str():
            return json.dumps(value, ensure_ascii=False)  # `eqdsl.frontend.parse` reads its escapes back
        case tuple():
            return "[" + ", ".join(str(v) for v in value) + "]"
        case _:
            return str(value)


def pattern_text(p: ir.Pattern) -> str:
    """A pattern as it is written in a rule: `div(?x, num(0))`."""
    match p:
        case ir.PVar(name=name):
            return "?" + name
        case ir.PBound(name=name):
            return name
        case ir.PLit(value=value):
            return literal(value)
        case ir.PApp(op=op, args=args):
            return f"{op}({', '.join(pattern_text(a) for a in args)})"
        case _:
            assert_never(p)


def program_text(program: ir.Program) -> str:
    uses = [0] * len(program.nodes)
    for node in program.nodes:
        for a in node.args:
            if isinstance(a, ir.Child):
                uses[a.index] += 1
    for r in program.roots:
        uses[r] += 1
    text: list[str] = []
    lines = [f"program {program.name}:"]
    for i, node in enumerate(program.nodes):
        args = [text[a.index] if isinstance(a, ir.Child) else literal(a) for a in node.args]
        expr = f"{node.op}({', '.join(args)})"
        has_children = any(isinstance(a, ir.Child) for a in node.args)
        if has_children or uses[i] > 1:
            lines.append(f"  let t{i} = {expr}")
            expr = f"t{i}"
        text.append(expr)
    lines += [f"  root {text[r]}" for r in program.roots]
    return "\n".join(lines) + "\n"
