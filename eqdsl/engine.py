"""The boundary with egglog: one e-graph session, its commands, and conversion of its outputs.

Contract: `EGraphSession` is the only place that calls `egglog.bindings`. Every egglog failure,
including Rust panics (`PanicException` is a `BaseException`), leaves as `EqdslError`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from egglog import bindings

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.lower.egglog import Lowered, load_program


@dataclass(frozen=True)
class StepResult:
    """What one `run <ruleset> 1` did."""

    matches: dict[str, int]
    updated: bool


class EGraphSession:
    def __init__(self, lowered: Lowered) -> None:
        self.lowered = lowered
        self._egraph = bindings.EGraph()
        self._execute(lowered.text, "declaring the language")
        self._constructors = set(lowered.op_of_egg)
        self.depth = 0

    def _execute(self, text: str, doing: str) -> list:
        try:
            return self._egraph.parse_and_run_program(text)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # noqa: BLE001 - EggSmolError and pyo3 PanicException
            raise EqdslError.one(f"egglog failed while {doing}: {_first_lines(str(err))}",
                                 notes=_hint(str(err))) from None

    def load(self, program: ir.Program) -> None:
        self._execute(load_program(program, self.lowered), f"loading program '{program.name}'")
        self.saturate_analysis()

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
        self.depth += 1

    def pop(self) -> None:
        self._execute("(pop)", "restoring the e-graph")
        self.depth -= 1

    def count_classes(self) -> int:
        frozen = self._egraph.freeze()
        outputs = set()
        for name, fn in frozen.functions.items():
            if name in self._constructors:
                outputs.update(str(row.output) for row in fn.rows)
        return len(outputs)

    def serialize(self) -> dict:
        try:
            return json.loads(self._egraph.serialize([]).to_json())
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # noqa: BLE001
            raise EqdslError.one(f"egglog failed to serialize the e-graph: {_first_lines(str(err))}") from None


def _first_lines(text: str, n: int = 4) -> str:
    return "\n".join(text.strip().splitlines()[:n])


def _hint(message: str) -> tuple[str, ...]:
    if "Illegal merge" in message:
        return ("a rule unioned two terms with different shapes: the rule is unsound, or a shape "
                "rule is wrong (run `eqdsl verify` on the ruleset)",)
    return ()
