"""Which nodes of a tensor-language program are known before it runs (weights and what is computed
from weights alone): exporters fold them into constants, executors compute them once.

Contract: `const_nodes(lang, program)` is the set of node indices whose operator is declared
`const` (`weight`, `scalar`) or whose tensor operands are all constant (`noop` never is: it joins
outputs).
"""
from __future__ import annotations

from eqdsl import ir


def const_nodes(lang: ir.Language, program: ir.Program) -> set[int]:
    const: set[int] = set()
    for i, node in enumerate(program.nodes):
        children = [a.index for a in node.args if isinstance(a, ir.Child)]
        if lang.ops[node.op].const or (children and node.op != "noop" and all(c in const for c in children)):
            const.add(i)
    return const


def output_nodes(program: ir.Program) -> list[int]:
    """The program's outputs in order, `noop` roots unpacked."""
    out: list[int] = []
    for r in program.roots:
        stack = [r]
        while stack:
            i = stack.pop()
            node = program.nodes[i]
            if node.op == "noop":
                stack += [a.index for a in reversed(node.args) if isinstance(a, ir.Child)]
            else:
                out.append(i)
    return out
