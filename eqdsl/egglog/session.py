"""The boundary with egglog: one e-graph session, its commands, and conversion of its outputs.

Contract: `EGraphSession` is the one object that runs egglog commands (`egg_name`'s probe aside,
this package is the only one importing egglog). Every egglog failure, including Rust panics
(`PanicException` is a `BaseException`), leaves as `EqdslError`. `extract_now` is how a schedule
extracts mid-run without knowing how the e-graph is read back. The e-graph is read once per state
(`_freeze`: egglog's `freeze()`, kept until the next command): the cycle filter and sampling
(`frozen`) and pricing (`live`, through `eqdsl.egglog.table`) all read that one copy.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from eqdsl import ir
from eqdsl.cost.model import CostModel, RuleCosts
from eqdsl.diagnostics import EqdslError
from eqdsl.egglog.bindings import bindings
from eqdsl.egglog.live import LiveEGraph, live_problem
from eqdsl.egglog.lower import SAMPLE_GENERATION, Facts, Lowered, load_program, root_rel, union_text
from eqdsl.egglog.readback import program_selection, selection_program
from eqdsl.egglog.table import node_table
from eqdsl.extract.result import Extraction, Extractor
from eqdsl.extract.starts import cheapest_known


@dataclass(frozen=True)
class StepResult:
    """What one `run <ruleset> 1` did."""

    matches: dict[str, int]
    updated: bool


class EGraphSession:
    def __init__(self, lowered: Lowered, costs: CostModel | None = None) -> None:
        self.lowered = lowered
        self.costs = costs if costs is not None else RuleCosts(lowered.language)  # how `live` prices nodes
        self.reset()

    def reset(self) -> None:
        """Start over with an empty e-graph of the same language (pulsed search's new epoch)."""
        self._egraph = bindings().EGraph()
        self._commands = 0  # commands run: the e-graph's state changes only with one
        self._freeze_cache: tuple[int, Any] | None = None  # (at which command count, its freeze())
        self._class_ids: dict[tuple[str, Any], str] = {}  # see eqdsl.egglog.table.node_table
        self._execute(self.lowered.text, "declaring the language")
        self._constructors = set(self.lowered.op_of_egg)
        self._class_sorts = frozenset(self.lowered.language.sorts)
        self._handles: dict[str, str] = {}  # class key → egglog global naming that class
        self._handle_log: list[list[str]] = []  # handles defined since each open push
        self.depth = 0
        self._sampled_declared = False
        self._generation = 0  # never reused, not even after a pop
        self._frozen_nodes: dict[tuple, FrozenNode] = {}  # see _node_for_row
        self.loaded: tuple[ir.Program, ...] = ()  # the programs loaded since the reset (alternatives included)

    def declare_sampled(self) -> None:
        """Declare the multi-pattern rules' sampled forms (`Lowered.sampled`), once; outside any
        push, as a pop would take them back."""
        if self._sampled_declared:
            return
        if self.depth:
            raise RuntimeError("declare_sampled() inside a push: declare before searching")
        header = f"(function {SAMPLE_GENERATION} () i64 :merge new)"
        self._execute("\n".join([header, *(s.text for s in self.lowered.sampled.values())]), "declaring sampled rules")
        self._sampled_declared = True

    def new_generation(self) -> int:
        """A new value of the sampled forms' recording generation (rows recorded from now on carry it)."""
        self._generation += 1
        self._execute(f"(set ({SAMPLE_GENERATION}) {self._generation})", "starting a recording")
        return self._generation

    def _execute(self, text: str, doing: str) -> list:
        self._commands += 1
        try:
            return self._egraph.parse_and_run_program(text)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # noqa: BLE001 - EggSmolError and pyo3 PanicException
            raise EqdslError.one(f"egglog failed while {doing}: {_first_lines(str(err))}",
                                 notes=_hint(str(err))) from None

    def load(self, program: ir.Program, facts: Facts = ()) -> None:
        """Add `program` (and `facts`: `lower.load_program`), then saturate the analyses."""
        self._execute(load_program(program, self.lowered, facts), f"loading program '{program.name}'")
        self.saturate_analysis()
        self.loaded += (program,)

    def roots_joined(self, pairs: list[tuple[int, int]], sorts: list[str]) -> bool:
        """Whether, for each pair (k, j) of the loaded program's root numbers, roots k and j are
        one e-class now (`sorts`: each pair's sort). A query: the e-graph does not change."""
        facts = " ".join(f"({root_rel(s)} ?r{n} {k}) ({root_rel(s)} ?r{n} {j})"
                         for n, ((k, j), s) in enumerate(zip(pairs, sorts)))
        try:
            self._egraph.parse_and_run_program(f"(check {facts})")
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # noqa: BLE001 - EggSmolError: a failed check, or a real failure
            if "Check failed" in str(err):
                return False
            raise EqdslError.one(f"egglog failed while comparing roots: {_first_lines(str(err))}") from None
        return True

    def union_alternatives(self, program: ir.Program, alternatives: tuple[ir.Program, ...]) -> None:
        """Add programs equal to the loaded `program` root by root, each root unioned with its."""
        self._execute(union_text(program, alternatives, self.lowered), "adding the alternative programs")
        self.saturate_analysis()
        self.loaded += alternatives

    def add_rule(self, command: str) -> None:
        """Declare one more rule (`lower.rule_command`) in this e-graph; outside any push, as a
        pop would take it back."""
        if self.depth:
            raise RuntimeError("add_rule() inside a push")
        self._execute(command, "adding a rule")

    def define_ruleset(self, name: str, rules: list[str]) -> None:
        """A ruleset running the named rules of the language together (a schedule's subset); a
        rule not lowered (`ir.reachable`: it can never fire here) is left out."""
        members = " ".join(self.lowered.rulesets[r] for r in rules if r in self.lowered.rulesets)
        command = f"(unstable-combined-ruleset {name} {members})" if members else f"(ruleset {name})"
        self._execute(command, f"defining ruleset {name}")

    def saturate_analysis(self) -> None:
        self._execute("(run-schedule (saturate analysis))", "computing shapes")

    def step(self, ruleset: str) -> StepResult:
        """Apply a ruleset once (all matches of one iteration), then bring shapes up to date."""
        outputs = self._execute(f"(run {ruleset} 1)\n(run-schedule (saturate analysis))",
                                f"running ruleset {ruleset}")
        report = outputs[0].report
        return StepResult(dict(report.num_matches_per_rule), bool(report.updated))

    def size(self) -> int:
        """Number of e-nodes of the language's operators (analysis rows excluded)."""
        outputs = self._execute("(print-size)", "measuring the e-graph")
        return sum(n for name, n in outputs[0].sizes if name in self._constructors)

    def push(self) -> None:
        self._execute("(push)", "saving the e-graph")
        self._handle_log.append([])
        self.depth += 1

    def pop(self) -> None:
        self._execute("(pop)", "restoring the e-graph")
        for key in self._handle_log.pop():
            del self._handles[key]
        self.depth -= 1

    def _freeze(self) -> Any:
        """egglog's `freeze()` of the current state, read once per state: the cycle filter, sampling
        and pricing between two commands share it."""
        if self._freeze_cache is None or self._freeze_cache[0] != self._commands:
            self._freeze_cache = (self._commands, self._egraph.freeze())
        return self._freeze_cache[1]

    def count_classes(self) -> int:
        frozen = self._freeze()
        outputs: set[str] = set()
        for name, fn in frozen.functions.items():
            if name in self._constructors:
                outputs.update(str(row.output) for row in fn.rows)
        return len(outputs)

    def frozen(self, relations: tuple[str, ...] = ()) -> "FrozenGraph":
        """The operator nodes (analysis rows and lets excluded) and the root classes, by class key;
        and the rows of the named relations and functions (`Lowered.sampled`'s), as class keys (a
        function's value last)."""
        frozen = self._freeze()
        nodes: list[FrozenNode] = []
        roots: list[tuple[int, str]] = []
        rows: dict[str, tuple[tuple[str, ...], ...]] = {}
        for name, fn in frozen.functions.items():
            sorts = list(fn.input_sorts)
            if name in relations:  # a function's rows end with its value (a relation's sort is @…Sort)
                valued = not fn.output_sort.startswith("@")
                cells = [*sorts, fn.output_sort] if valued else sorts
                rows[name] = tuple(tuple(self._row_key(s, v) for s, v in zip(cells, [*r.inputs, r.output]))
                                   for r in fn.rows)
            elif name in self.lowered.root_rels:
                roots += [(self._egraph.value_to_i64(r.inputs[1]), f"{sorts[0]}:{r.inputs[0]}")
                          for r in fn.rows]
            elif name in self._constructors:
                nodes += [self._node_for_row(name, sorts, fn.output_sort, r) for r in fn.rows]
        return FrozenGraph(tuple(nodes), tuple(c for _, c in sorted(roots)), rows)

    def _node_for_row(self, fn: str, sorts: list[str], out_sort: str, row) -> "FrozenNode":
        """Remembered by the row's raw values (a pure function of them): most rows recur from one
        freeze to the next, and building a node (class keys are text) costs 4 µs, looking it up 0.6."""
        key = (fn, tuple(row.inputs), row.output, row.subsumed)
        node = self._frozen_nodes.get(key)
        if node is None:
            if len(self._frozen_nodes) >= FROZEN_NODES_KEPT:
                self._frozen_nodes.clear()
            node = self._frozen_nodes[key] = _frozen_node(fn, sorts, out_sort, row, self._class_sorts)
        return node

    def _row_key(self, sort: str, value: Any) -> str:
        """A relation cell: a class key, or `i64:N` for an integer."""
        return f"i64:{self._egraph.value_to_i64(value)}" if sort == "i64" else f"{sort}:{value}"

    def subsume(self, graph: "FrozenGraph", cut: list[int], witness: dict[str, int]) -> None:
        """Subsume nodes `cut` of `graph` (a `frozen()` result with no change since). `witness`
        gives each class a node whose children's witnesses never lead back to it."""
        handles = _HandleWriter(self, graph, witness)
        lines = [f"(subsume {handles.term(graph.nodes[i])})" for i in cut]
        self._execute_with(handles, lines, "filtering cycles")

    def add_rows(self, graph: "FrozenGraph", witness: dict[str, int], relation: str,
                 rows: list[tuple[str, ...]]) -> None:
        """Add `rows` (class keys of `graph`, a `frozen()` result with no change since) to a
        relation of classes; `witness` as for `subsume`."""
        handles = _HandleWriter(self, graph, witness)
        handles.define(tuple(k for row in rows for k in row))
        lines = [f"({relation} {' '.join(str(handles.name_of(k)) for k in row)})" for row in rows]
        self._execute_with(handles, lines, f"adding rows to {relation}")

    def _execute_with(self, handles: "_HandleWriter", lines: list[str], doing: str) -> None:
        self._execute("\n".join(handles.lets + lines), doing)
        self._handles.update(handles.new)
        if self._handle_log:
            self._handle_log[-1].extend(handles.new)

    def live(self) -> LiveEGraph:
        """The e-graph as an extraction problem priced by the session's cost model."""
        try:
            table = node_table(self._freeze(), self._egraph, self._class_sorts, self._class_ids)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # noqa: BLE001 - pyo3 PanicException
            raise EqdslError.one(f"egglog failed to read the e-graph back: {_first_lines(str(err))}") from None
        return live_problem(table, self.lowered, self.costs)

    def extract_now(self, extractor: Extractor, name: str,
                    known: tuple[ir.Program, ...] = ()) -> tuple[ir.Program, Extraction]:
        """Extract every root with `extractor`; the program is named `name`. `known`: programs the
        e-graph holds (`self.loaded`, say), given to the extractor as starts: the result costs at
        most the cheapest of them."""
        live = self.live()
        selections = (program_selection(live, p) for p in known)
        live = replace(live, problem=replace(live.problem, known=tuple(s for s in selections if s is not None)))
        extraction = cheapest_known(live.problem, extractor.extract(live.problem))
        return selection_program(live, extraction.selection, name), extraction

    def serialize(self) -> dict:
        """egglog's own JSON of the e-graph (`live` lists the same nodes without it)."""
        try:
            return json.loads(self._egraph.serialize([]).to_json())
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # noqa: BLE001
            raise EqdslError.one(f"egglog failed to serialize the e-graph: {_first_lines(str(err))}") from None


FROZEN_NODES_KEPT = 100_000  # EGraphSession._node_for_row's memory: ~780 bytes each, ~80 MB at most


class FrozenNode(NamedTuple):
    """One operator row of a frozen e-graph. Class keys are `Sort:id` (ids are per sort). A named
    tuple: a freeze makes one per row, and a frozen dataclass took three times as long to build."""

    fn: str  # egglog constructor name
    eclass: str
    args: tuple[tuple[str, Any], ...]  # (egglog sort, raw value) per argument
    children: tuple[str, ...]  # class keys of the arguments of user sorts
    subsumed: bool
    key: tuple  # (fn, `sort:value` per argument): the same node in every freeze of one e-graph


@dataclass(frozen=True)
class FrozenGraph:
    nodes: tuple[FrozenNode, ...]
    roots: tuple[str, ...]  # class keys, in root order
    relations: dict[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)  # asked-for rows


def _frozen_node(fn: str, sorts: list[str], out_sort: str, row, class_sorts: frozenset[str]) -> FrozenNode:
    values = row.inputs  # each read of `inputs` converts the row again
    cells = tuple([f"{s}:{v}" for s, v in zip(sorts, values)])
    kids = tuple([cell for s, cell in zip(sorts, cells) if s in class_sorts])
    return FrozenNode(fn, f"{out_sort}:{row.output}", tuple(zip(sorts, values)), kids, bool(row.subsumed),
                      (fn, cells))


class _HandleWriter:
    """Names classes in egglog commands: a class is named by a global `$hN` let-bound to its
    witness node (well-founded: following witnesses never returns to a class), children first."""

    def __init__(self, session: EGraphSession, graph: FrozenGraph, witness: dict[str, int]) -> None:
        self.session, self.graph, self.witness = session, graph, witness
        self.lets: list[str] = []
        self.new: dict[str, str] = {}

    def name_of(self, key: str) -> str | None:
        return self.session._handles.get(key) or self.new.get(key)

    def term(self, node: FrozenNode) -> str:
        """The node as an egglog term over class names (defining the names it needs first)."""
        self.define(node.children)
        return self._render(node)

    def _render(self, node: FrozenNode) -> str:
        args = [self._defined(f"{s}:{v}") if s in self.session._class_sorts else self.literal(s, v)
                for s, v in node.args]
        return f"({node.fn}{''.join(' ' + a for a in args)})"

    def _defined(self, key: str) -> str:
        name = self.name_of(key)
        assert name is not None, f"class {key} rendered before `define` named it"
        return name

    def define(self, keys: tuple[str, ...]) -> None:
        """Let-bind every class in `keys` that has no name yet, children before parents."""
        stack = [(k, False) for k in keys]
        while stack:
            key, expanded = stack.pop()
            if self.name_of(key):
                continue
            node = self.graph.nodes[self.witness[key]]
            if not expanded:
                stack.append((key, True))
                stack += [(k, False) for k in node.children if not self.name_of(k)]
                continue
            name = f"$h{len(self.session._handles) + len(self.new)}"
            self.lets.append(f"(let {name} {self._render(node)})")
            self.new[key] = name

    def literal(self, sort: str, value) -> str:
        eg = self.session._egraph
        match sort:
            case "i64":
                return str(eg.value_to_i64(value))
            case "String":
                return json.dumps(eg.value_to_string(value))
            case "bool":
                return "true" if eg.value_to_bool(value) else "false"
            case _:  # the [Int] vector sort
                items = [str(eg.value_to_i64(v)) for v in eg.value_to_vec(value)]
                return f"(vec-of {' '.join(items)})" if items else "(vec-empty)"


def _first_lines(text: str, n: int = 4) -> str:
    return "\n".join(text.strip().splitlines()[:n])


def _hint(message: str) -> tuple[str, ...]:
    if "Illegal merge" in message and "function _shape_" in message:
        return ("a rule unioned two terms with different shapes: the rule is unsound, or a shape "
                "rule is wrong (run `eqdsl verify` on the ruleset)",)
    if "Illegal merge" in message:
        return ("two terms of one e-class got different values of an analysis declared `merge agree`: a "
                "rule united terms whose values differ, or an analysis rule is wrong (run `eqdsl verify`)",)
    return ()
