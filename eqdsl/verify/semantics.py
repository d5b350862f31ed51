"""Reference semantics: one NumPy function per operator, found from the `.eqr` language.

Contract: `load_semantics(lang)` returns {op: function or Leaf} covering every operator of `lang`
or raises `EqdslError` naming the missing ones. A language's table is `SEMANTICS` in the module
`eqdsl.languages.<name>.semantics` (shipped languages) or in `<file>_ref.py` beside its `.eqr` file (a
user's); an including language inherits the included ones' entries and may override them.
A `_ref.py` is Python: loading it runs it, with the user's rights. `load_semantics(lang,
run_ref=False)` (`--no-ref`) refuses to, naming the file, so an untrusted ruleset can be checked
and verified only where it needs no code of its own.
Functions take the operator's arguments in declared order (arrays or floats for sort-typed ones,
int / str / tuple for values) and return an array, a float, or a tuple for multi-output sorts.
`evaluate_pattern` and `evaluate_program` run them; a NaN/Inf an operator makes from finite
inputs raises `SemanticsError` naming the operator.
"""
from __future__ import annotations

import importlib
import importlib.util
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, assert_never

import numpy as np

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.languages.base import Leaf, OpSemantics, Split, value_shape


class SemanticsError(Exception):
    """An operator misbehaved on valid inputs (NaN/Inf, an exception); the message names it."""


def load_semantics(lang: ir.Language, run_ref: bool = True) -> dict[str, OpSemantics]:
    table: dict[str, OpSemantics] = {}
    searched = []
    for name, file in lang.lineage:
        module, where = _find_module(name, file, run_ref)
        searched.append(where)
        if module is not None:
            table.update(_table_of(module, where))
    missing = sorted(op for op in lang.ops if op not in table)
    if missing:
        raise EqdslError.one(f"no reference semantics for operator(s) {', '.join(missing)} of language "
                             f"{lang.name}; expected an entry in SEMANTICS in one of: {', '.join(searched)}")
    return {op: table[op] for op in lang.ops}


def _table_of(module: Any, where: str) -> dict[str, OpSemantics]:
    """The module's `SEMANTICS`, checked: operator names to functions or `Leaf`s."""
    table = getattr(module, "SEMANTICS", {})
    if not isinstance(table, dict):
        raise EqdslError.one(f"{where}: expected SEMANTICS to be a dict of operator names to functions, found "
                             f"{type(table).__name__}")
    for op, fn in table.items():
        if not isinstance(op, str) or not (callable(fn) or isinstance(fn, Leaf)):
            raise EqdslError.one(f"{where}: expected SEMANTICS to map operator names to functions or Leaf(...), "
                                 f"found {op!r}: {type(fn).__name__}")
    return table


def _find_module(name: str, file: str, run_ref: bool):
    shipped = f"eqdsl.languages.{name.replace('-', '_')}.semantics"
    if _shipped(shipped):
        return importlib.import_module(shipped), shipped
    sibling = Path(file).with_name(Path(file).stem + "_ref.py")
    if not sibling.is_file():
        return None, str(sibling)
    if not run_ref:
        raise EqdslError.one(f"{sibling}: reference semantics are Python code, and --no-ref forbids "
                             "running it; expected no --no-ref for a ruleset you trust")
    spec = importlib.util.spec_from_file_location(f"eqdsl_user_ref_{name}", sibling)
    assert spec is not None and spec.loader is not None  # a .py path always has a source loader
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - a user's file: report, don't crash
        raise EqdslError.one(f"{sibling}: cannot load reference semantics: {type(err).__name__}: {err}") from None
    except SystemExit as exit_:  # exit() in a user's file must not end eqdsl as if it had finished
        raise EqdslError.one(f"{sibling}: cannot load reference semantics: it called exit({exit_.code!r}); "
                             "expected a module that defines SEMANTICS") from None
    return module, str(sibling)


def _shipped(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # no package for this language name
        return False


def apply(sem: dict[str, OpSemantics], op: str, args: list[Any]) -> Any:
    fn = sem[op]
    if isinstance(fn, Leaf):
        raise SemanticsError(f"'{op}' is an input operator; its value must be drawn, not computed")
    try:
        with np.errstate(all="ignore"):
            out = fn(*args)
    except Exception as err:  # noqa: BLE001 - a user's operator: the message names it
        raise SemanticsError(f"operator '{op}' raised {type(err).__name__}: {err}") from None
    if not _is_value(out):
        raise SemanticsError(f"operator '{op}' returned {type(out).__name__}; expected an array, a number or a "
                             "tuple of them")
    if not _finite(out) and all(_finite(a) for a in args if not isinstance(a, (str, tuple))):
        raise SemanticsError(f"operator '{op}' produced NaN or Inf from finite inputs")
    return out


def _is_value(v: Any) -> bool:
    if isinstance(v, tuple):
        return all(_is_value(x) for x in v)
    if isinstance(v, np.ndarray):
        return v.dtype.kind in "biuf"
    return isinstance(v, (int, float, np.number, np.bool_, Split))


def _finite(v: Any) -> bool:
    if isinstance(v, tuple):
        return all(_finite(x) for x in v)
    if isinstance(v, (np.ndarray, float, np.floating)):
        return bool(np.all(np.isfinite(v)))
    return True


def evaluate_pattern(p: ir.Pattern, sem: dict[str, OpSemantics], env: dict[str, Any],
                     memo: dict[ir.Pattern, Any] | None = None) -> Any:
    """Value of a rule side; `env` maps pattern variables and `where` names to values."""
    memo = {} if memo is None else memo
    if p in memo:
        return memo[p]
    match p:
        case ir.PVar(name=v) | ir.PBound(name=v):
            value = env[v]
        case ir.PLit(value=v):
            value = v
        case ir.PApp(op=op, args=args):
            value = apply(sem, op, [evaluate_pattern(a, sem, env, memo) for a in args])
        case _:
            assert_never(p)
    memo[p] = value
    return value


@dataclass
class SharedTerms:
    """Values of terms already evaluated for one seed, by term (hash-consed): programs evaluated
    with the same `SharedTerms` compute each term they have in common once."""

    ids: dict[tuple, int] = field(default_factory=dict)
    values: dict[int, Any] = field(default_factory=dict)


def evaluate_program(program: ir.Program, sem: dict[str, OpSemantics], seed: int,
                     known: Callable[[ir.TermNode], Any] | None = None,
                     shared: SharedTerms | None = None,
                     progress: Callable[[int, int], None] = lambda done, total: None) -> list[Any]:
    """The values of a program's roots. Each leaf's value depends only on `seed` and the leaf's
    own operator and arguments, so two programs over the same inputs see the same values whatever
    their node order. Leaves are normal with variance 1 / fan-in (prod(shape) / shape[0], as for
    [in, out] and [out, in, kh, kw] weights), so deep real models stay finite; `known(leaf)`, when
    given and not None, is the leaf's value instead (real weights). `shared`: terms evaluated
    before with the same seed are not computed again. `progress(done, total)` after each node."""
    shared = shared if shared is not None else SharedTerms()
    term_ids: list[int] = []
    for i, node in enumerate(program.nodes):
        term = (node.op, tuple(("#", term_ids[a.index]) if isinstance(a, ir.Child) else a for a in node.args))
        term_id = shared.ids.setdefault(term, len(shared.ids))
        term_ids.append(term_id)
        if term_id not in shared.values:
            args = [shared.values[term_ids[a.index]] if isinstance(a, ir.Child) else a for a in node.args]
            shared.values[term_id] = _node_value(node, args, sem, seed, known)
        progress(i + 1, len(program.nodes))
    return [shared.values[term_ids[r]] for r in program.roots]


def _node_value(node: ir.TermNode, args: list[Any], sem: dict[str, OpSemantics], seed: int,
                known: Callable[[ir.TermNode], Any] | None) -> Any:
    fn = sem[node.op]
    given = known(node) if known is not None and isinstance(fn, Leaf) else None
    if given is not None:
        return given
    if isinstance(fn, Leaf):
        key = zlib.crc32(repr((node.op, node.args)).encode())
        shape = fn.shape(*args)
        if math.prod(shape) > MAX_DRAWN:
            raise SemanticsError(f"{node.op}{tuple(node.args)!r} holds {math.prod(shape):.3g} values; at most "
                                 f"{MAX_DRAWN:,} can be drawn to evaluate it")
        rng = np.random.default_rng([seed, key])
        if fn.draw is not None:
            return fn.draw(rng, shape, *args)
        fan_in = max(1, int(np.prod(shape[1:]))) if len(shape) > 1 else 1
        return draw(rng, shape) / np.sqrt(fan_in)
    return apply(sem, node.op, args)


MAX_DRAWN = 2 ** 31  # values in one random leaf (16 GiB as float64)


def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> Any:
    return float(rng.standard_normal()) if shape == () else rng.standard_normal(shape)


def magnitude(v: Any) -> float:
    """The largest |x| in a value (arrays, floats, Splits, tuples of them); 0 for non-numbers."""
    if isinstance(v, tuple):
        return max((magnitude(x) for x in v), default=0.0)
    if not isinstance(v, (np.ndarray, float, np.floating, Split)):
        return 0.0
    a = np.asarray(v, dtype=float)
    return float(np.max(np.abs(a))) if a.size else 0.0


def largest_difference(a: Any, b: Any) -> float:
    """Max |a - b| over matching outputs; inf when structures or shapes differ."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)):
            return float("inf")
        return max((largest_difference(x, y) for x, y in zip(a, b)), default=0.0)
    if value_shape(a) != value_shape(b):
        return float("inf")
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def agree(a: Any, b: Any, rtol: float = 1e-6, atol: float = 1e-8) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
                and all(agree(x, y, rtol, atol) for x, y in zip(a, b)))
    if value_shape(a) != value_shape(b):
        return False
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return bool(np.allclose(a, b, rtol=rtol, atol=atol))
