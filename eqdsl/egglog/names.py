"""Names of the lowered egglog program (constructors, shape functions, root relations, rulesets)
and the small records `lower` returns about it."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.egglog.bindings import bindings
from eqdsl.egglog.terms import Unlowerable

VEC_SORT = "IVec"
PRIM_SORTS = {ir.Prim.INT: "i64", ir.Prim.STR: "String", ir.Prim.BOOL: "bool", ir.Prim.INTS: VEC_SORT}
GROUPS = ("single", "multi", "all")
USER_RULESET = "user"  # an `egglog { ... }` block's rules: `:ruleset user` runs them with the single-pattern rules


_NAMES: dict[str, str] = {}  # op → its name in egglog, once probed


def egg_name(op: str) -> str:
    """The op's name in egglog: itself unless egglog already has a primitive of that name."""
    name = _NAMES.get(op)
    if name is None:
        name = _NAMES[op] = op if _declarable([op]) else op + "_"
    return name


def probe_names(ops: Iterable[str]) -> None:
    """`egg_name` of all of `ops` with one probe where none clashes (the usual case: a probe is a
    fresh egglog, ~4 ms); where one does, `egg_name` probes each on its own."""
    fresh = sorted(set(ops) - _NAMES.keys())
    if fresh and _declarable(fresh):
        _NAMES.update((op, op) for op in fresh)


def _declarable(ops: list[str]) -> bool:
    probe = bindings().EGraph()
    declared = "\n".join(f"(constructor {op} () Probe__)" for op in ops)
    try:
        probe.parse_and_run_program(f"(sort Probe__)\n{declared}")
        return True
    except bindings().EggSmolError:  # a clash with a primitive; anything else (a stop) is not a name
        return False


def shape_fn(sort: str) -> str:
    return f"_shape_{sort}"


def root_rel(sort: str) -> str:
    return f"_root_{sort}"


def ruleset_of(rule: ir.Rule) -> str:
    return f"rule_{rule.name}"


@dataclass(frozen=True)
class Sampled:
    """A multi-pattern rule applied to chosen matches only (egglog 14 has no match limit): ruleset
    `record` sets function `candidates` of every match's left-side root classes to the current
    value of SAMPLE_GENERATION (one row per match: a relation with the generation as a column
    grew by every match at every recording, and each push copied those rows); ruleset `gated`
    is the rule with `(allowed roots…)` added to its query, so it fires where the caller put rows
    in `allowed`. `sorts`: the sorts of the roots, in left-side order. `text` declares all of it;
    it is not in `Lowered.text` (declaring every rule's copies made loading TENSAT's language
    ~0.08 s slower): a session declares it when a schedule asks (`EGraphSession.declare_sampled`)."""

    record: str
    gated: str
    candidates: str  # match roots → the latest generation (SAMPLE_GENERATION) that recorded it
    allowed: str
    sorts: tuple[str, ...]
    text: str = ""


def lowering_error(what: str, err: Unlowerable, span) -> EqdslError:
    return EqdslError.one(f"cannot lower {what} to egglog: {err}", span)

