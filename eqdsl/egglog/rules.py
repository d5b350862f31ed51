"""One rule lowered to an egglog `rule`: the query (left side, conditions, the shapes and
`require`s of every right-side node: TENSAT's check-before-apply) and the actions, and a
multi-pattern rule's sampled form (`eqdsl.egglog.lower` puts them together)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence, assert_never

from eqdsl import ir
from eqdsl.egglog.names import Sampled, egg_name, lowering_error, ruleset_of, shape_fn
from eqdsl.egglog.sexp import Call, Sexp, Var, binding, call, equality, rename, show, variables
from eqdsl.egglog.terms import Unlowerable, bind_fields, facts, literal, term
from eqdsl.ir.exprs import analysis_reads, env_key, pattern_vars, shape_key, term_shape_key


# ---- rewrite rules ----
@dataclass
class RuleLowering:
    lang: ir.Language
    query: list[Sexp] = field(default_factory=list)
    env: dict[str, Sexp] = field(default_factory=dict)
    counter: int = 0
    rhs_shapes: dict[Sexp, Sexp | None] = field(default_factory=dict)  # right-side term → its shape
    # Left-side nodes exist, so their shape requirements hold: with `assuming`, requirements only
    # feed `same` (a union-find of equal shape variables) and right-side ones they imply are dropped
    # — equalities between shape variables make egglog's planner join shape tables first.
    assuming: bool = False
    same: dict[str, str] = field(default_factory=dict)
    assumed: set[str] = field(default_factory=set)  # left-side shape variables: droppable if unread
    known: set[Sexp] = field(default_factory=set)  # left-side requirement facts, canonical (`same`)

    def find(self, v: str) -> str:
        while self.same.get(v, v) != v:
            v = self.same[v]
        return v

    def require(self, fact: Sexp) -> None:
        pair = equality(fact)
        if pair is not None:
            a, b = map(self.find, pair)
            if a == b:
                return
            self.same[a] = b
        canon = self.canonical(fact)
        if self.assuming:
            self.known.add(canon)
        elif canon not in self.known and fact not in self.query:
            self.query.append(fact)

    def canonical(self, fact: Sexp) -> Sexp:
        return rename(fact, self.find) if self.same else fact  # nothing equated yet: fact is canonical

    def trivially_true(self, req: ir.Expr, env: dict[str, Sexp]) -> bool:
        """broadcasts(x, x): a shape broadcasts to itself."""
        match req:
            case ir.Builtin(fn="broadcasts", args=(ir.Ref(name=b), ir.Ref(name=a))):
                return b in env and a in env and self.canonical(env[b]) == self.canonical(env[a])
            case _:
                return False

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"_{prefix}{self.counter}"

    def shape_of_var(self, var: str, sort: str) -> Sexp:
        key = shape_key(var)
        if key not in self.env:
            self.env[key] = Var(f"_s_{var}")
            self.query.append(call("=", Var(f"_s_{var}"), call(shape_fn(sort), Var(f"?{var}"))))
        return self.env[key]


def _prune_unused(query: list[Sexp], actions: Sequence[Sexp], assumed: set[str]) -> list[Sexp]:
    """Drop shape lookups (`_s_x`) and left-side shapes nothing reads. A right-side shape stays even
    if unread: computing it may fail, and that failure keeps an ill-shaped node out."""
    while True:
        uses = Counter(v for s in [*query, *actions] for v in variables(s))
        unused = [f for f in query if (v := binding(f)) is not None and uses[v] == 1
                  and (v.startswith("_s_") or v in assumed)]
        if not unused:
            return query
        query = [f for f in query if f not in unused]


def show_all(items: Sequence[Sexp]) -> str:
    return " ".join(show(s) for s in items)


def pattern(p: ir.Pattern) -> Sexp:
    match p:
        case ir.PVar(name=v):
            return Var(f"?{v}")
        case ir.PLit(value=v):
            return literal(v)
        case ir.PBound(name=n):
            return Var(f"?{n}")
        case ir.PApp(op=op, args=args):
            return Call(egg_name(op), tuple(pattern(a) for a in args))
        case _:
            assert_never(p)


def rewrite(lang: ir.Language, rule: ir.Rule) -> tuple[list[Sexp], list[Sexp]]:
    """The rule's query and actions; the i-th left side's root class is `_lhs{i}`."""
    lw = RuleLowering(lang)
    roots = _roots(rule)
    lw.query += [call("=", Var(r), pattern(p)) for r, p in zip(roots, rule.lhs)]
    try:
        _conditions(lw, rule)
        lw.assuming = True
        for lhs in rule.lhs:
            _check_shape(lw, lhs)
        lw.assuming = False
        for rhs in rule.rhs:
            if isinstance(rhs, ir.PApp):  # a bare ?x on the right exists already: nothing to check
                _check_shape(lw, rhs)
    except Unlowerable as err:
        raise lowering_error(f"rule '{rule.name}'", err, rule.span) from None
    actions: list[Sexp] = [call("union", Var(r), pattern(p)) for r, p in zip(roots, rule.rhs)]
    return _prune_unused(lw.query, actions, lw.assumed), actions


def _roots(rule: ir.Rule) -> list[str]:
    return [f"_lhs{i}" for i in range(len(rule.lhs))]


def rule_text(query: Sequence[Sexp], actions: Sequence[Sexp], ruleset: str, name: str) -> str:
    return f"(rule ({show_all(query)})\n      ({show_all(actions)})\n      :ruleset {ruleset} :name \"{name}\")"


def sampled_form(lang: ir.Language, rule: ir.Rule, query: list[Sexp], actions: list[Sexp]) -> Sampled:
    base, name = ruleset_of(rule), rule.name
    sorts = tuple(lang.ops[p.op].result for p in rule.lhs if isinstance(p, ir.PApp))
    record, gated, candidates, allowed = f"{base}__record", f"{base}__gated", f"_cand_{name}", f"_allow_{name}"
    roots = tuple(Var(r) for r in _roots(rule))
    generation = Var("_sample_gen")
    text = "\n".join([
        # a match's latest generation (one row per match, not one per recording)
        f"(function {candidates} ({' '.join(sorts)}) i64 :merge (max old new))",
        f"(relation {allowed} ({' '.join(sorts)}))",
        f"(ruleset {record})", f"(ruleset {gated})",
        rule_text([*query, call("=", generation, Call(SAMPLE_GENERATION, ()))],
                   [Call("set", (Call(candidates, roots), generation))], record, f"{name}:record"),
        rule_text([*query, Call(allowed, roots)], actions, gated, f"{name}:gated")])
    return Sampled(record, gated, candidates, allowed, sorts, text)


# The generation a recording belongs to: a recording rule reads it in its query, so setting a new
# value re-fires the rule on every current match, and rows of older generations are ignored
# (egglog 14 cannot clear a relation; recording inside push/pop instead copies the e-graph).
SAMPLE_GENERATION = "_sample_generation"


def _conditions(lw: RuleLowering, rule: ir.Rule) -> None:
    var_sorts = _var_sorts(rule)
    for var in _var_names(rule):
        lw.env["?" + var] = Var(f"?{var}")
    for name, value in rule.wheres:
        _bind_shapes(lw, value, var_sorts)
        _bind_analyses(lw, value)
        lw.query += bind_fields([value], lw.env, lambda: lw.fresh("f"))
        lw.query.append(call("=", Var(f"?{name}"), term(value, lw.env)))
        lw.env[name] = Var(f"?{name}")
    for cond in rule.conds:
        match cond:
            case ir.ExprCond(expr=e):
                _bind_shapes(lw, e, var_sorts)
                _bind_analyses(lw, e)
                lw.query += bind_fields([e], lw.env, lambda: lw.fresh("f"))
                lw.query.extend(facts(e, lw.env))
            case ir.ClassCond(equal=eq, left=l, right=r):
                for side in (l, r):
                    if not eq and isinstance(side, ir.PApp) and has_var(side):
                        raise Unlowerable("'!=' compares an e-class with a variable or a ground "
                                          "term, not a pattern with variables")
                lw.query.append(call("=" if eq else "!=", pattern(l), pattern(r)))
            case _:
                assert_never(cond)


def has_var(p: ir.Pattern) -> bool:
    match p:
        case ir.PVar() | ir.PBound():
            return True
        case ir.PLit():
            return False
        case ir.PApp(args=args):
            return any(has_var(a) for a in args)
        case _:
            assert_never(p)


def _var_names(rule: ir.Rule) -> set[str]:
    found: dict[str, ir.ValueType] = {}
    for p in rule.lhs:
        pattern_vars(p, found)
    return set(found)


def _var_sorts(rule: ir.Rule) -> dict[str, str]:
    """Pattern variables of a user sort, with the sort."""
    out: dict[str, str] = {}

    def walk(p: ir.Pattern) -> None:
        match p:
            case ir.PVar(name=v, type=ir.SortType(name=s)):
                out[v] = s
            case ir.PApp(args=args):
                for a in args:
                    walk(a)
            case _:
                pass

    for p in rule.lhs:
        walk(p)
    return out


def _bind_shapes(lw: RuleLowering, e: ir.Expr, var_sorts: dict[str, str]) -> None:
    for var in _shape_vars(e):
        if isinstance(var, ir.ShapeOfTerm):
            shape = _check_shape(lw, var.pattern)
            if shape is None:
                raise Unlowerable(f"shape({var.pattern!r}) reads a term whose operator has no shape rule")
            lw.env[term_shape_key(var)] = shape
        else:
            lw.shape_of_var(var, var_sorts[var])


def _bind_analyses(lw: RuleLowering, e: ir.Expr) -> None:
    """Each analysis value `e` reads, looked up in the query: the rule matches only where it is set."""
    for read in analysis_reads(e):
        key = env_key(read)
        if key not in lw.env:
            lw.env[key] = Var(lw.fresh("an"))
            lw.query.append(call("=", lw.env[key], call(egg_name(read.analysis), pattern(read.pattern))))


def _shape_vars(e: ir.Expr) -> list[str | ir.ShapeOfTerm]:
    """Pattern variables (and right-side terms) whose shapes `e` reads."""
    match e:
        case ir.ShapeOf(var=v):
            return [v]
        case ir.ShapeOfTerm():
            return [e]
        case ir.Const() | ir.Ref() | ir.AnalysisOf():
            return []
        case ir.Builtin(args=args) | ir.ListOf(items=args):
            return [v for a in args for v in _shape_vars(a)]
        case ir.BinOp(left=a, right=b) | ir.IndexOf(base=a, index=b):
            return _shape_vars(a) + _shape_vars(b)
        case ir.UnOp(arg=a) | ir.SliceOf(base=a) | ir.FieldOf(base=a):
            return _shape_vars(a)
        case ir.Replace(base=a, index=b, value=c):
            return _shape_vars(a) + _shape_vars(b) + _shape_vars(c)
        case _:
            assert_never(e)


def _check_shape(lw: RuleLowering, p: ir.Pattern) -> Sexp | None:
    """Add the shape requirements of a right-side node; return its shape's egglog expression."""
    match p:
        case ir.PVar(name=v, type=ir.SortType(name=s)):
            return lw.shape_of_var(v, s) if lw.lang.sorts[s].shape_type is not None else None
        case ir.PApp(op=op_name, args=args):
            key = pattern(p)
            if key not in lw.rhs_shapes:
                lw.rhs_shapes[key] = _check_app_shape(lw, op_name, args)
            return lw.rhs_shapes[key]
        case _:  # a value-typed variable or a literal is its own "shape"
            return pattern(p)


def _check_app_shape(lw: RuleLowering, op_name: str, args: tuple[ir.Pattern, ...]) -> Sexp | None:
    child_exprs = [_check_shape(lw, a) for a in args]
    rule = lw.lang.shapes.get(op_name)
    if rule is None:
        return None
    env = {name: e for name, e in zip(rule.params, child_exprs) if e is not None}
    for fact in bind_fields([*rule.requires, rule.body], env, lambda: lw.fresh("f")):
        lw.query.append(fact)
        if lw.assuming:
            lw.assumed.add(str(binding(fact)))
    for req in rule.requires:
        if lw.trivially_true(req, env):
            continue
        for fact in facts(req, env):
            lw.require(fact)
    body = term(rule.body, env)
    if isinstance(body, Var):
        return body
    shape_var = lw.fresh("r")
    lw.query.append(call("=", Var(shape_var), body))
    if lw.assuming:
        lw.assumed.add(shape_var)
    return Var(shape_var)

