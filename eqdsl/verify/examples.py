"""Valid example sizes for a rule, constructed from the shape rules rather than rejected into being.

Contract: `ExampleSpace(lang, rule)` knows the rule's pattern variables and every shape
requirement of both sides (each operator application's `require`s, `where` bindings, `if`
conditions over values). `rank_choices` lists the rank assignments no requirement rules out
(found with `NullBackend`, ranks 1..max_rank); `solve(ranks, hints)` asks CP-SAT for sizes that
meet every requirement, near `hints` (so Hypothesis controls, and shrinks, the sizes), and
`concrete(assignment)` re-checks the result with the builder's evaluator and returns the
`where` values, or None if the requirements fail (never trusted blindly).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

from eqdsl import ir
from eqdsl.ir.evaluate import EvalError, evaluate
from eqdsl.ir.exprs import index_refs, pattern_ops, pattern_vars, shape_key, term_shape_key, term_shapes
from eqdsl.verify.analyses import sized_part
from eqdsl.verify.symbolic import CpBackend, Infeasible, NullBackend, SymEval

INT_RANGE = (-1, 8)  # Int pattern variables: small, including one invalid value
INT_SHIFT = 2  # an Int variable's hint h asks for h - 2: -1, 0 and 1 are drawn as often as sizes are
# (a scalar(n, d)'s sign decides rules like relu(x) * s == relu(x * s); hints start at 1)
SIZE_LIMIT = 64  # sizes stay near the hints (1..max_dim) unless a condition needs more (n >= 32)


DISTINCT_HINTS = (2, 3, 4, 5, 6)  # sizes near these: no two dimensions equal unless a requirement says so


@dataclass(frozen=True)
class Assignment:
    sizes: dict[str, tuple[int, ...]]  # shape-sorted and [Int] variables → their lists
    ints: dict[str, int]  # Int variables


@dataclass(frozen=True)
class Concrete:
    wheres: dict[str, Any]
    env: dict[str, Any]  # also `shape(<PApp repr>)` → that application's shape

    def shape_of(self, p: ir.PApp) -> Any:
        return self.env.get(f"shape({p!r})")


class ExampleSpace:
    def __init__(self, lang: ir.Language, rule: ir.Rule, max_rank: int = 4, max_dim: int = 6) -> None:
        # clauses that read analysis values hold of drawn terms, not sizes: `verify.analyses` checks them
        self.lang, self.rule, self.analysed_rule = lang, sized_part(rule), rule
        self.max_rank, self.max_dim = max_rank, max_dim
        self.vars: dict[str, ir.ValueType] = {}
        for p in rule.lhs:
            pattern_vars(p, self.vars)
        self.sized = sorted(v for v, t in self.vars.items() if self._has_size(t))
        self.int_vars = sorted(v for v, t in self.vars.items() if t == ir.Prim.INT)
        self._models: dict[tuple[int, ...], tuple[CpBackend, list, list[dict[int, Any]], list[int]]] = {}
        # `solve`'s answers: Hypothesis draws one rule's hints again and again (1 in 6 of TASO's)
        self._solutions: dict[tuple[Any, ...], Assignment | None] = {}

    def _has_size(self, t: ir.ValueType) -> bool:
        if isinstance(t, ir.SortType):
            return self.lang.sorts[t.name].shape_type is not None
        return t == ir.Prim.INTS

    def has_fields(self, v: str) -> bool:
        """?v's sort has a two-field analysis value (stored [len(first)] ++ first ++ second)."""
        t = self.vars[v]
        return isinstance(t, ir.SortType) and bool(self.lang.sorts[t.name].fields)

    @cached_property
    def pinned(self) -> list[str]:
        """Int variables enumerated rather than solved: where a rule reads two-field values, Ints
        index into and split lists, which CP-SAT variables cannot do."""
        if not (any(self.has_fields(v) for v in self.sized) or self._builds_fields()):
            return []
        structural = {r.removeprefix("?") for c in self.rule.conds if isinstance(c, ir.ExprCond)
                      for r in index_refs(c.expr)}
        structural |= {r.removeprefix("?") for _, e in self.rule.wheres for r in index_refs(e)}
        for p in (*self.rule.lhs, *self.rule.rhs):
            structural |= self._structural_args(p)
        return [v for v in self.int_vars if v in structural]

    def _structural_args(self, p: ir.Pattern) -> set[str]:
        """Int variables passed where an operator's shape rule indexes or splits a list with them."""
        if not isinstance(p, ir.PApp):
            return set()
        out = set().union(*(self._structural_args(a) for a in p.args)) if p.args else set()
        rule = self.lang.shapes.get(p.op)
        if rule is not None:
            used = set().union(*(index_refs(e) for e in (*rule.requires, rule.body)))
            out |= {a.name for name, a in zip(rule.params, p.args) if isinstance(a, ir.PVar) and name in used}
        return out

    def _builds_fields(self) -> bool:
        ops = pattern_ops(*self.rule.lhs, *self.rule.rhs)
        return any(self.lang.sorts[self.lang.ops[o].result].fields for o in ops)

    def _rank_options(self, v: str) -> list[Any]:
        """A plain shape's rank (0 only where a condition says `shape(?v) == []`: an ONNX scalar;
        1 for an `Int` shape, a vector's length), or a two-field value's (first, second) field lengths."""
        if self.lang.holds_vectors(self.vars[v]):
            return [1]
        if not self.has_fields(v):
            return [0] if self._scalar(v) else list(range(1, self.max_rank + 1))
        return [(a, b) for a in range(self.max_rank + 1) for b in range(self.max_rank + 1 - a) if a + b >= 1]

    def _scalar(self, v: str) -> bool:
        return any(isinstance(c, ir.ExprCond) and c.expr == ir.BinOp("eq", ir.ShapeOf(v, ir.Prim.INTS), ir.ListOf(()),
                                                                        ir.Prim.BOOL) for c in self.rule.conds)

    @cached_property
    def rank_choices(self) -> list[tuple[Any, ...]]:
        """Per sized variable its rank (or field lengths), then the values of pinned Ints: every
        combination no requirement rules out, found depth-first so that an application whose
        variables are all chosen prunes the rest (the full product is too large with 4+ variables)."""
        order = self._search_order()
        options = {v: self._rank_options(v) if v in self.sized else range(-1, 5) for v in order}
        found: list[tuple[Any, ...]] = []

        def extend(i: int, chosen: dict[str, Any]) -> None:
            if i == len(order):
                found.append(tuple(chosen[v] for v in [*self.sized, *self.pinned]))
                return
            for option in options[order[i]]:
                chosen[order[i]] = option
                if self._possible(chosen, complete=i + 1 == len(order)):
                    extend(i + 1, chosen)
            del chosen[order[i]]

        extend(0, {})
        return found

    def _search_order(self) -> list[str]:
        """Sized variables and pinned Ints in order of first appearance in the rule's patterns."""
        seen: dict[str, ir.ValueType] = {}
        for p in (*self.rule.lhs, *self.rule.rhs):
            pattern_vars(p, seen)
        chosen = set(self.sized) | set(self.pinned)
        return [v for v in seen if v in chosen]

    def _possible(self, chosen: dict[str, Any], complete: bool) -> bool:
        """No requirement of the applications whose variables are all chosen fails (all of them,
        `where`s and `if`s included, once `complete`)."""
        sizes = {v: _with_lengths(r, [None] * _total(r)) if v in chosen else _PENDING for v, r in
                 ((v, chosen.get(v)) for v in self.sized)}
        ints = {v: chosen.get(v, _PENDING) if v in self.pinned else None for v in self.int_vars}
        ev, env = SymEval(NullBackend()), self._env(sizes, ints)
        try:
            if complete:
                self._requirements(ev, env)
            else:
                for side in (*self.rule.lhs, *self.rule.rhs):
                    self._shape_of(side, ev, env)
        except Infeasible:
            return False
        return True

    def solve(self, ranks: tuple[Any, ...], hints: list[int]) -> Assignment | None:
        """The valid sizes and Ints nearest `hints` for these ranks, or None where none are."""
        key = (ranks, tuple(hints[:self.hint_count(ranks)]))
        if key not in self._solutions:
            self._solutions[key] = self._solved(ranks, list(key[1]))
        found = self._solutions[key]
        return None if found is None else Assignment(dict(found.sizes), dict(found.ints))

    def _solved(self, ranks: tuple[Any, ...], hints: list[int]) -> Assignment | None:
        backend, unknowns, targets, shifts = self._model(ranks)
        model = backend.model
        model.clear_hints()
        model.clear_assumptions()
        for var, target, hint, shift in zip(unknowns, targets, hints, shifts):
            model.add_hint(var, hint - shift)
            model.add_assumption(target[hint])  # the objective: sizes closest to the hints
        from ortools.sat.python import cp_model  # on first use: `eqdsl check` never loads OR-Tools

        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        # the nearest valid sizes need not be proven nearest. A deterministic limit (work, not
        # seconds; the 165 `mined` rules' solves took at most 0.012): under load a wall-clock one
        # answered differently when Hypothesis replayed an example, and it raised FlakyStrategyDefinition
        solver.parameters.max_deterministic_time = 0.1
        solver.parameters.max_time_in_seconds = 10.0  # a backstop only
        if solver.solve(model) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None
        values = [int(solver.value(v)) for v in unknowns]
        sizes, at = {}, 0
        for v, r in zip(self.sized, ranks):
            n = _total(r)
            sizes[v], at = tuple(_with_lengths(r, values[at:at + n])), at + n
        free = [v for v in self.int_vars if v not in self.pinned]
        ints = dict(zip(free, values[at:])) | dict(zip(self.pinned, ranks[len(self.sized):]))
        return Assignment(sizes, ints)

    def distinct(self, hints: tuple[int, ...] = DISTINCT_HINTS, tries: int = 64,
                 accept: Callable[[Assignment], bool] = lambda a: True) -> tuple[Assignment, Concrete] | None:
        """Valid sizes in which no two dimensions coincide unless a requirement says so (drawn
        near `hints` in turn), for the first rank choice that has any that `accept` takes; None
        if none of the first `tries` has. A rule's one telling example: `eqdsl derive`'s
        instance (which accepts sizes its leaf operators can make), the screen before `verify`
        in `eqdsl synthesize`."""
        for ranks in self.rank_choices[:tries]:
            n = self.hint_count(ranks)
            assignment = self.solve(ranks, [hints[k % len(hints)] for k in range(n)])
            if assignment is None or not accept(assignment):
                continue
            concrete = self.concrete(assignment)
            if concrete is not None:
                return assignment, concrete
        return None

    def hint_count(self, ranks: tuple[Any, ...]) -> int:
        return sum(_total(r) for r in ranks[:len(self.sized)]) + len(self.int_vars) - len(self.pinned)

    def _model(self, ranks: tuple[Any, ...]) -> tuple[CpBackend, list, list[dict[int, Any]], list[int]]:
        """The CP-SAT model of every requirement for these ranks (built once): the unknown
        sizes, and per unknown a target (fixed to the hint by `solve`) and |size - target| in
        the objective, so a hint that breaks a requirement still yields the nearest valid sizes.
        A target is fixed by assuming one of its `target == v` literals (the model is not rebuilt)."""
        if ranks not in self._models:
            backend = CpBackend()
            sizes, unknowns, shifts = {}, [], []
            for v, r in zip(self.sized, ranks):
                is_shape = isinstance(self.vars[v], ir.SortType)
                lo, hi = (1, SIZE_LIMIT) if is_shape else INT_RANGE
                dims = [backend.int_var(lo, hi) for _ in range(_total(r))]
                unknowns += dims
                # an [Int]'s items are values (a permutation, axes): its hints reach 0 and -1 too
                shifts += [0 if is_shape else INT_SHIFT] * len(dims)
                sizes[v] = _with_lengths(r, dims)
            ints = {v: backend.int_var(*INT_RANGE) for v in self.int_vars if v not in self.pinned}
            shifts += [INT_SHIFT] * len(ints)
            unknowns += list(ints.values())
            ints |= dict(zip(self.pinned, ranks[len(self.sized):]))
            self._requirements(SymEval(backend), self._env(sizes, ints))
            targets, distances = [], []
            for u, shift in zip(unknowns, shifts):
                t = backend.int_var(1 - shift, self.max_dim - shift)
                targets.append({h: backend.compare("eq", t, h - shift) for h in range(1, self.max_dim + 1)})
                d = backend.int_var(0, 2 * SIZE_LIMIT)
                backend.model.add(d >= u - t)
                backend.model.add(d >= t - u)
                distances.append(d)
            backend.model.minimize(sum(distances))
            self._models[ranks] = (backend, unknowns, targets, shifts)
        return self._models[ranks]

    def _env(self, sizes: dict[str, Any], ints: dict[str, Any]) -> dict[str, Any]:
        """Shape-sorted variables are read as `shape(?x)`, value variables as `?x`."""
        vectors = {v for v in sizes if self.lang.holds_vectors(self.vars[v])}  # read as their lengths
        env = {shape_key(v): s[0] if v in vectors and s is not _PENDING else s for v, s in sizes.items()}
        env.update({"?" + v: s for v, s in sizes.items() if self.vars[v] == ir.Prim.INTS})
        env.update({"?" + v: i for v, i in ints.items()})
        return env

    def _requirements(self, ev: SymEval, env: dict[str, Any]) -> None:
        """Require every application's shape rule, then `where` values and `if` conditions."""
        for side in (*self.rule.lhs, *self.rule.rhs):
            self._shape_of(side, ev, env)
        for name, expr in self.rule.wheres:
            env[name] = self._value_withterm_shapes(expr, ev, env)
            for side in self.rule.rhs:  # right sides may read the new binding
                self._shape_of(side, ev, env)
        for cond in self.rule.conds:
            if isinstance(cond, ir.ExprCond):
                ev.require(self._value_withterm_shapes(cond.expr, ev, env))

    def _value_withterm_shapes(self, expr: ir.Expr, ev: SymEval, env: dict[str, Any]) -> Any:
        """`expr`'s value once the `shape(term)` nodes it reads are in `env`."""
        for node in term_shapes(expr):
            env[term_shape_key(node)] = self._shape_of(node.pattern, ev, env)
        return ev.value(expr, env)

    def _shape_of(self, p: ir.Pattern, ev: SymEval, env: dict[str, Any]) -> Any:
        match p:
            case ir.PVar(name=v, type=t):
                return env.get(shape_key(v)) if isinstance(t, ir.SortType) else env.get("?" + v, env.get(shape_key(v)))
            case ir.PLit(value=v):
                return list(v) if isinstance(v, tuple) else v
            case ir.PBound(name=n):
                return env.get(n, _PENDING)
            case ir.PApp(op=op, args=args):
                return self._app_shape(p, op, args, ev, env)

    def _app_shape(self, p: ir.PApp, op: str, args, ev: SymEval, env: dict[str, Any]) -> Any:
        key = f"shape({p!r})"
        if key in env:
            return env[key]
        children = [self._shape_of(a, ev, env) for a in args]
        if any(c is _PENDING for c in children):
            return _PENDING
        rule = self.lang.shapes.get(op)
        if rule is None:
            return None
        local = dict(zip(rule.params, children))
        for req in rule.requires:
            ev.require(ev.value(req, local))
        env[key] = ev.value(rule.body, local)
        return env[key]

    def concrete(self, a: Assignment) -> Concrete | None:
        """Check every requirement with the builder's evaluator: the `where` values and each
        application's shape, or None if a requirement fails."""
        env = self._env(a.sizes, a.ints)
        try:
            for side in (*self.rule.lhs, *self.rule.rhs):
                if _concrete_shape(self.lang, side, env, {}) is _FAILED:
                    return None
            wheres: dict[str, Any] = {}
            for name, expr in self.rule.wheres:
                env[name] = wheres[name] = self._concrete_value(expr, env, wheres)
            for side in self.rule.rhs:
                if _concrete_shape(self.lang, side, env, wheres) is _FAILED:
                    return None
            conds = [c.expr for c in self.rule.conds if isinstance(c, ir.ExprCond)]
            if not all(self._concrete_value(c, env, wheres) for c in conds):
                return None
        except (EvalError, KeyError):
            return None
        return Concrete(wheres, env)

    def _concrete_value(self, expr: ir.Expr, env: dict[str, Any], wheres: dict[str, Any]) -> Any:
        for node in term_shapes(expr):
            env[term_shape_key(node)] = _concrete_shape(self.lang, node.pattern, env, wheres)
        return evaluate(expr, env)


_PENDING = object()  # a right side reads a `where` value not computed yet
_FAILED = object()


def _concrete_shape(lang: ir.Language, p: ir.Pattern, env: dict[str, Any], wheres: dict[str, Any]) -> Any:
    match p:
        case ir.PVar(name=v, type=t):
            return env.get(shape_key(v)) if isinstance(t, ir.SortType) else env.get("?" + v)
        case ir.PLit(value=v):
            return v
        case ir.PBound(name=n):
            return wheres.get(n)  # None: not computed yet
        case ir.PApp(op=op, args=args):
            children = [_concrete_shape(lang, a, env, wheres) for a in args]
            if any(c is _FAILED for c in children):
                return _FAILED
            rule = lang.shapes.get(op)
            if rule is None:
                return None
            local = dict(zip(rule.params, children))
            if None in local.values():
                return None  # waits for a `where` value
            if not all(evaluate(r, local) for r in rule.requires):
                return _FAILED
            env[f"shape({p!r})"] = out = evaluate(rule.body, local)
            return out


def _total(rank: Any) -> int:
    return sum(rank) if isinstance(rank, tuple) else rank


def _with_lengths(rank: Any, dims: list) -> list:
    """A two-field value is stored as [len(first)] ++ first ++ second (ir.FieldOf)."""
    return [rank[0], *dims] if isinstance(rank, tuple) else list(dims)
