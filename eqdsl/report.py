"""Run reports: the JSON written next to the optimized program, and the console summary.

Contract: `write_outputs(result, scratch)` writes `report.json`, `optimized.eqr` and `egraph.json`
(egraph-serialize format with costs and roots, readable by `eqdsl extract`) into the scratch
folder and publishes them in one rename (`eqdsl.output`: an output folder is only ever replaced
when eqdsl made it).
"""
from __future__ import annotations

import json
import math
import shutil
import sys
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eqdsl import ir
from eqdsl.config import effective
from eqdsl.cost.measured import noisy_text
from eqdsl.egglog.readback import program_nodes
from eqdsl.extract.egraph import ExtractionProblem, cost_by_op
from eqdsl.extract.result import Extraction
from eqdsl.ir.builder import new_nodes
from eqdsl.ir.matching import built_by
from eqdsl.output import Scratch
from eqdsl.pipeline import RunResult
from eqdsl.report_page import cost_text
from eqdsl.schedule.runner import ScheduleOutcome
from eqdsl.sources.base import Baselines
from eqdsl.stages import STAGES


def _finished(result: RunResult) -> tuple[ScheduleOutcome, ExtractionProblem]:
    """A finished run's schedule outcome and extraction problem (both set by the pipeline)."""
    assert result.outcome is not None and result.live is not None
    return result.outcome, result.live.problem


def extraction_json(e: Extraction, problem: ExtractionProblem) -> dict:
    return {
        "method": e.method, "status": e.status.value, "cost": e.cost, "bound": e.bound,
        "gap": e.gap, "seconds": round(e.seconds, 6), "note": e.note, "trace": [list(t) for t in e.trace],
        "choices": {problem.class_ids[c]: problem.nodes[n].id for c, n in sorted(e.selection.items())},
    }


def _rule_texts(lang: ir.Language, outcome: ScheduleOutcome | None) -> dict[str, str]:
    """The source text of every rule that matched (the report page shows it beside the name)."""
    matched = {rule for it in (outcome.iterations if outcome else ()) for rule, n in it.matches.items() if n}
    texts: dict[str, str] = {}
    lines: dict[str, list[str]] = {}
    for rule in lang.rules:
        if rule.name not in matched and rule.name.removesuffix("-rev") not in matched:
            continue
        try:
            source = lines.setdefault(rule.span.file, Path(rule.span.file).read_text().splitlines())
        except OSError:
            continue
        texts[rule.name] = " ".join(line.strip() for line in source[rule.span.line - 1:rule.span.end_line])[:500]
    return texts


def report_json(result: RunResult) -> dict:
    outcome, problem = _finished(result)
    best = result.best
    optimized = result.optimized_program()
    return {
        "config": None if result.config is None else result.config.raw,
        "effective_config": None if result.config is None else effective(result.config),
        "rule_text": _rule_texts(result.language, result.outcome),
        "language": result.language.name,
        "program": result.program.name,
        "input_notes": list(result.notes),
        "stages_s": {k: round(v, 6) for k, v in result.stages.items()},
        "schedule": _schedule_json(outcome),
        "egraph": {"classes": problem.num_classes, "nodes": len(problem.nodes)},
        "original_cost": result.original_cost,
        **_runtime_json(result),
        "baselines": {} if result.baselines is None else result.baselines.costs,
        "baseline_units": baseline_units(result),
        "best_cost": best.cost,
        "improvement_pct": _improvement(result.original_cost, best.cost),
        "extractor": extraction_json(best, problem),
        "compare": {m: {k: v for k, v in extraction_json(e, problem).items() if k != "choices"}
                    for m, e in result.extractions.items()},
        "optimized_program": result.optimized_text,
        "programs": {"input": program_json(result.program), "optimized": program_json(optimized)},
        "program_facts": {"input": program_facts(result, result.program),
                          "optimized": program_facts(result, optimized)},
        "cost_by_op": {"input": result.input_cost_by_op, "optimized": cost_by_op(problem, best.selection)},
        **{stage.key: _stage_json(result, stage.key) for stage in STAGES.values()},  # None: the stage did not run
        "measured_costs": None if result.measured is None else _measured_json(result),
    }


def _schedule_json(outcome) -> dict:
    return {
        "stop_reason": outcome.stop.value,
        "start_nodes": outcome.start_nodes,
        "final_nodes": outcome.nodes,
        "seconds": round(outcome.seconds, 6),
        "iterations": [
            {"iteration": r.index, "ruleset": r.ruleset, "nodes": r.nodes, "classes": r.classes,
             "matches": r.matches, "seconds": round(r.seconds, 6), "rolled_back": r.rolled_back,
             "rollback_reason": None if r.rollback is None else r.rollback.value}
            for r in outcome.iterations],
        **outcome.details,  # the schedule kind's own sections (pulsed: epochs, mcts: steps)
    }


def _runtime_json(result: RunResult) -> dict:
    """What the target's runtime does beyond the cost model's operators."""
    best = result.best
    return {
        "runtime_input_cost": result.runtime_input_cost,  # as the target's runtime runs it (its fusions)
        "runtime_rules": list(result.runtime_rules),
        # what each program spends copying tensors between the runtime's layouts (eqdsl.cost.layouts)
        "layout_reorders": None if result.layouts is None else {
            "input": result.input_reorders, "optimized": result.reorders(best.selection)},
        # what of each program's cost the runtime runs inside a neighbour (a Conv's bias, BatchNorm,
        # Relu; a Pad written into the Conv after it): priced at nothing in the predicted speedup
        "conv_folds": None if result.layouts is None else {
            "input": result.input_folds, "optimized": result.folds(best.selection)},
        "predicted_speedup": result.predicted_speedup if math.isfinite(result.predicted_speedup) else None,
    }


def run_json(result: RunResult, folder: Path) -> dict:
    """`eqdsl run --json`'s object: what the summary says, as data (the whole run is report.json)."""
    best = result.best
    return {"ok": all(done.ok for done in result.finished.values()), "language": result.language.name,
            "program": result.program.name, "original_cost": result.original_cost, "best_cost": best.cost,
            "improvement_pct": _improvement(result.original_cost, best.cost),
            "extractor": {"method": best.method, "status": best.status.value, "bound": best.bound, "gap": best.gap},
            "stages": {key: done.ok for key, done in result.finished.items()},
            "optimized_program": result.optimized_text, "output": str(folder),
            "report": str(folder / "report.json")}


def program_facts(result: RunResult, program: ir.Program) -> list[dict] | None:
    """Per node of `program`, its shape and its cost in the final e-graph (the report page's
    tooltips); None where a node is not found there."""
    live = result.live
    matched = None if live is None else program_nodes(live, program)
    if live is None or matched is None:
        return None
    p = live.problem
    return [{"shape": live.shapes.get(p.class_ids[p.nodes[n].eclass]), "cost": p.nodes[n].cost} for n in matched]


def program_json(program: ir.Program) -> dict:
    """A program as plain data (what the report page draws): nodes in order, each an operator and
    its arguments (a child node's index as {"node": i}, or a literal), and the roots."""
    return {"nodes": [{"op": n.op, "args": [{"node": a.index} if isinstance(a, ir.Child) else a for a in n.args]}
                      for n in program.nodes], "roots": list(program.roots)}


def _stage_json(result: RunResult, key: str) -> dict | None:
    done = result.finished.get(key)
    return None if done is None else done.report


def _measured_json(result: RunResult) -> dict:
    m = result.measured
    assert m is not None
    return {"backend": m.backend.name, "device": m.device, "cache": str(m.cache.path), "runs": m.runs,
            "timed": len(m.stats.timed), "cached": m.stats.cached, "rule_priced_ops": sorted(m.stats.rule_priced),
            "noisy": len(m.stats.noisy)}


def _improvement(original: float, best: float) -> float:
    return 0.0 if original <= 0 else round(100.0 * (original - best) / original, 4)


def problem_json(problem: ExtractionProblem) -> dict:
    nodes = {n.id: {"op": n.op, "children": [problem.nodes[problem.class_nodes[c][0]].id for c in n.children],
                    "eclass": problem.class_ids[n.eclass], "cost": n.cost, "subsumed": i in problem.blocked}
             for i, n in enumerate(problem.nodes)}
    return {"nodes": nodes, "root_eclasses": [problem.class_ids[r] for r in problem.roots]}


def write_outputs(result: RunResult, scratch: Scratch) -> Path:
    """Returns the folder the results went to (see `Scratch.publish`)."""
    report = report_json(result)
    (scratch.new / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    if result.config is not None and result.config.report_html:
        _write_page(report, scratch.new / "report.html")
    (scratch.new / "optimized.eqr").write_text(result.optimized_text)
    (scratch.new / "egraph.json").write_text(json.dumps(problem_json(_finished(result)[1])) + "\n")
    if result.stage_folder is not None:
        folder = Path(result.stage_folder.name)
        for done in result.finished.values():
            for name in done.files:  # same file system or not: move, never copy twice
                if Path(name).name != name:
                    raise ValueError(f"stage {done.key} names {name!r}: expected a file name in its folder")
                shutil.move(folder / name, scratch.new / name)
        result.stage_folder.cleanup()
    return scratch.publish()


def _write_page(report: dict, path: Path) -> None:
    """The report page; a page that cannot be made never costs the run its results: the rest is
    published and the failure said (`eqdsl report FOLDER` can retry it)."""
    from eqdsl.report_page import page

    try:
        path.write_text(page(report))
    except Exception as err:  # noqa: BLE001 - any failure of the page alone; the results stand
        print(f"warning: report.html not written ({type(err).__name__}: {err}); the results are "
              "published without it", file=sys.stderr)


SHOWN_NODES = 20  # a larger program is summarised by its operator counts: the folder has it whole


def _print_program(result: RunResult, console: Console) -> None:
    """The optimized program where it is small, else its size and the operators whose counts
    changed; then the rules whose right sides it holds where the input did not (`ir.matching`)."""
    optimized = result.optimized_program()
    built = built_by(result.language.rules, optimized, new_nodes(result.program, optimized))
    if len(optimized.nodes) <= SHOWN_NODES:
        console.print(result.optimized_text.rstrip(), markup=False)
    else:
        _print_counts(result.program, optimized, console)
    if built:
        shown = ", ".join(f"{name} {n:,}" for name, n in built.most_common(RULES_SHOWN))
        more = f" and {len(built) - RULES_SHOWN} more" if len(built) > RULES_SHOWN else ""
        console.print(f"rules in the result (nodes where a right side is, and its left side is not): {shown}{more}",
                      markup=False)


RULES_SHOWN = 6


def _print_counts(program: ir.Program, optimized: ir.Program, console: Console) -> None:
    before, after = Counter(n.op for n in program.nodes), Counter(n.op for n in optimized.nodes)
    changed = [f"{op} {before[op]} → {after[op]}" for op in sorted(before | after) if before[op] != after[op]]
    console.print(f"program optimized: {len(optimized.nodes):,} nodes (the input {len(program.nodes):,}), in "
                  "optimized.eqr in the output folder; operators: " + (", ".join(changed) or "the same counts"),
                  markup=False)


def print_summary(result: RunResult, console: Console) -> None:
    for note in result.notes:
        console.print(f"input: {note}", markup=False)
    _print_search(result, console)
    if result.baselines is not None:
        _print_baselines(result.baselines, result.best.cost, console)
        _print_units(result, console)
    _print_program(result, console)
    if result.measured is not None:
        m = result.measured
        rules = ", ".join(sorted(m.stats.rule_priced)) or "none"
        console.print(f"costs measured on {m.device}: {len(m.stats.timed)} operator configuration(s) timed in "
                      f"this run, {m.stats.cached} by earlier runs ({m.cache.path}); priced by cost rules (no "
                      f"kernel): {rules}{noisy_text(m.stats)}", markup=False)
    for done in result.finished.values():
        style = "green" if done.ok else "bold red"
        for text, coloured in done.lines:
            console.print(f"[{style}]{escape(text)}[/]" if coloured else escape(text), highlight=False)


def _print_search(result: RunResult, console: Console) -> None:
    """The schedule's outcome, every extractor's result, and the best program's gain."""
    outcome, best = _finished(result)[0], result.best
    console.print(f"[bold]{result.language.name}[/] / program [bold]{result.program.name}[/]: "
                  f"{outcome.start_nodes} → {outcome.nodes} e-nodes in {len(outcome.iterations)} "
                  f"iteration(s), stopped: [bold]{outcome.stop.value}[/] ({outcome.seconds:.3f} s)")
    table = Table("extractor", "DAG cost", "status", "bound", "gap", "seconds")
    for method, e in result.extractions.items():
        table.add_row(method, cost_text(e.cost), e.status.value, "" if e.bound is None else cost_text(e.bound),
                      "" if e.gap is None else f"{100 * e.gap:.2f} %", f"{e.seconds:.3f}")
    console.print(table)
    for line in outcome.lines:  # the schedule kind's own
        console.print(line, markup=False)
    console.print(f"original cost {cost_text(result.original_cost)} → best {cost_text(best.cost)} "
                  f"({_improvement(result.original_cost, best.cost):.2f} % cheaper, {best.method}, "
                  f"{best.status.value})")
    if result.runtime_input_cost is not None:
        rules = ", ".join(result.runtime_rules)
        console.print(f"the input as the target's runtime runs it (its own rewrites: {rules}) "
                      f"costs {cost_text(result.runtime_input_cost)}: the best is "
                      f"{_improvement(result.runtime_input_cost, best.cost):.2f} % cheaper", markup=False)
    if result.layouts is not None:
        console.print(f"layout reorders on the target's runtime: input {cost_text(result.input_reorders)}, best "
                      f"{cost_text(result.reorders(best.selection))}; folded into convolutions: input "
                      f"{cost_text(result.input_folds)}, best {cost_text(result.folds(best.selection))}", markup=False)
    if result.runtime_input_cost is not None or result.layouts is not None:
        extra = ", reorders and folds included" if result.layouts is not None else ""
        console.print(f"predicted speedup {result.predicted_speedup:.3f}× (the input as its runtime runs it "
                      f"over the best{extra})", markup=False)


RUN = "this run"


def baseline_units(result: RunResult) -> dict[str, dict[str, float]]:
    """unit → method → value for the source's other units, the run's own program included."""
    b = result.baselines
    if b is None or not b.units:
        return {}
    ours = b.measure(result.optimized_program()) if b.measure is not None else {}
    return {unit: {**values, **({RUN: ours[unit]} if unit in ours else {})} for unit, values in b.units.items()}


def _print_units(result: RunResult, console: Console) -> None:
    assert result.baselines is not None
    ref = result.baselines.reference
    for unit, values in baseline_units(result).items():
        console.print(f"in {unit}: " + ", ".join(
            f"{name} {cost_text(v)}" + ("" if name == ref else f" ({_improvement(values[ref], v):.1f} % below {ref})")
            for name, v in values.items()), markup=False)


def _print_baselines(baselines: Baselines, best: float, console: Console) -> None:
    ref = baselines.reference
    below = lambda cost: _improvement(baselines.costs[ref], cost)  # noqa: E731
    console.print(f"{baselines.title}: " + ", ".join(
        f"{name} {cost_text(cost)} ({below(cost):.1f} % below {ref})" for name, cost in baselines.costs.items()) +
        f"; this run's best is {below(best):.1f} % below {ref}")
