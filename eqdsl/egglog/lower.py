"""Lower a checked `ir.Language` (and its programs) to egglog program text.

Contract: `lower_language(lang)` returns `Lowered`: the declarations and rules as egglog text
plus the names the runner needs (one ruleset per rule, the `single`/`multi`/`all`/`analysis`
groups, analysis functions, root relations, and each multi-pattern rule's `Sampled` form).
`load_program(program, lowered)` returns the text that inserts a program (one rule with local
lets, run once) and marks its roots.

Shape checking (TENSAT's check-before-apply): every new node on a rule's right side has its
shape computed in the rule's query from the shapes of the left side's variables, and its
operator's `require` conditions are added to the query, so an ill-shaped term is never built.
"""
from __future__ import annotations

import functools
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence, assert_never

from egglog import bindings

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.egglog.sexp import Call, Sexp, Var, binding, call, equality, rename, show, variables
from eqdsl.egglog.terms import Unlowerable, bind_fields, facts, literal, term
from eqdsl.ir.exprs import shape_key, term_shape_key

VEC_SORT = "IVec"
PRIM_SORTS = {ir.Prim.INT: "i64", ir.Prim.STR: "String", ir.Prim.BOOL: "bool", ir.Prim.INTS: VEC_SORT}
GROUPS = ("single", "multi", "all")


@functools.cache
def egg_name(op: str) -> str:
    """The op's name in egglog: itself unless egglog already has a primitive of that name."""
    probe = bindings.EGraph()
    try:
        probe.parse_and_run_program(f"(sort Probe__)\n(constructor {op} () Probe__)")
        return op
    except BaseException:  # noqa: BLE001 - egglog reports the clash as EggSmolError
        return op + "_"


def shape_fn(sort: str) -> str:
    return f"_shape_{sort}"


def root_rel(sort: str) -> str:
    return f"_root_{sort}"


def ruleset_of(rule: ir.Rule) -> str:
    return f"rule_{rule.name}"


@dataclass(frozen=True)
class Lowered:
    language: ir.Language
    text: str
    op_of_egg: dict[str, str]  # egglog constructor name → eqdsl operator
    analysis_fns: frozenset[str]
    root_rels: frozenset[str]
    rulesets: dict[str, str] = field(default_factory=dict)  # rule name → ruleset
    sampled: dict[str, Sampled] = field(default_factory=dict)  # multi-pattern rule name → its sampled form

    @functools.cached_property
    def bookkeeping(self) -> frozenset[str]:
        """Tables that are not part of the program's e-graph (the sampled forms' rows)."""
        return frozenset([SAMPLE_GENERATION, *(r for s in self.sampled.values() for r in (s.candidates, s.allowed))])


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


def lower_language(lang: ir.Language) -> Lowered:
    sections = [f";; eqdsl language {lang.name}", *_declarations(lang)]
    sections.append(";; ---- shape analysis ----")
    sections.extend(_shape_rule(lang, r) for r in lang.shapes.values())
    sections.append(";; ---- rewrite rules ----")
    sampled: dict[str, Sampled] = {}
    for rule in lang.rules:
        sections.append(f"(ruleset {ruleset_of(rule)})")
        query, actions = _rewrite(lang, rule)
        sections.append(_rule_text(query, actions, ruleset_of(rule), rule.name))
        if rule.is_multi and all(isinstance(p, ir.PApp) for p in rule.lhs):
            sampled[rule.name] = _sampled(lang, rule, query, actions)
    sections.extend(_groups(lang))
    shaped = [s for s in lang.sorts.values() if s.shape_type is not None]
    return Lowered(
        lang, "\n".join(sections) + "\n",
        {egg_name(o): o for o in lang.ops},
        frozenset(shape_fn(s.name) for s in shaped),
        frozenset(root_rel(s) for s in lang.sorts),
        {r.name: ruleset_of(r) for r in lang.rules},
        sampled,
    )


def rule_command(lang: ir.Language, rule: ir.Rule, ruleset: str) -> str:
    """One single-pattern rule as an egglog `rule` command in `ruleset`: how a prover grows its
    rule set in a declared e-graph (`synth.derive.Prover.add`) instead of declaring it again."""
    query, actions = _rewrite(lang, rule)
    return _rule_text(query, actions, ruleset, rule.name)


def _declarations(lang: ir.Language) -> list[str]:
    out = [f"(sort {VEC_SORT} (Vec i64))", f"(sort {VEC_SORT}s (Vec {VEC_SORT}))",  # IVecs: see terms._dynamic_slice
           "(ruleset analysis)", "(ruleset load)"]
    out += [f"(sort {s})" for s in lang.sorts]
    for op in lang.ops.values():
        args = " ".join(_egg_type(p.type) for p in op.params)
        cost = lang.costs[op.name].constant
        cost_attr = f" :cost {int(cost)}" if cost is not None and cost == int(cost) else ""
        out.append(f"(constructor {egg_name(op.name)} ({args}) {op.result}{cost_attr})")
    for s in lang.sorts.values():
        if s.shape_type is not None:
            out.append(f"(function {shape_fn(s.name)} ({s.name}) {PRIM_SORTS[s.shape_type]} :no-merge)")
        out.append(f"(relation {root_rel(s.name)} ({s.name} i64))")
    return out


def _egg_type(t: ir.ValueType) -> str:
    match t:
        case ir.SortType(name=n):
            return n
        case ir.Prim() as p:
            return PRIM_SORTS[p]
        case _:
            assert_never(t)


def _lowering_error(what: str, err: Unlowerable, span) -> EqdslError:
    return EqdslError.one(f"cannot lower {what} to egglog: {err}", span)


def _shape_rule(lang: ir.Language, rule: ir.ShapeRule) -> str:
    op = lang.ops[rule.op]
    env: dict[str, Sexp] = {}
    args: list[Sexp] = []
    child_facts: list[Sexp] = []
    for name, param in zip(rule.params, op.params):
        env[name] = Var(name)
        match param.type:
            case ir.SortType(name=sort) if lang.sorts[sort].shape_type is not None:
                args.append(Var(f"_c_{name}"))
                child_facts.append(call("=", Var(name), call(shape_fn(sort), Var(f"_c_{name}"))))
            case _:
                args.append(Var(name))
    names = (f"_f{i}" for i in itertools.count())
    try:
        fields = bind_fields([*rule.requires, rule.body], env, lambda: next(names))
        requires = [f for r in rule.requires for f in facts(r, env)]
        body = term(rule.body, env)
    except Unlowerable as err:
        raise _lowering_error(f"the shape rule of '{rule.op}'", err, rule.span) from None
    query = [call("=", Var("_e"), Call(egg_name(op.name), tuple(args))), *child_facts, *fields, *requires]
    return (f"(rule ({_show_all(query)})\n      ((set ({shape_fn(op.result)} _e) {show(body)}))\n"
            f"      :ruleset analysis :name \"shape:{rule.op}\")")


# ---- rewrite rules ----
@dataclass
class _RuleLowering:
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


def _show_all(items: Sequence[Sexp]) -> str:
    return " ".join(show(s) for s in items)


def _pattern(p: ir.Pattern) -> Sexp:
    match p:
        case ir.PVar(name=v):
            return Var(f"?{v}")
        case ir.PLit(value=v):
            return literal(v)
        case ir.PBound(name=n):
            return Var(f"?{n}")
        case ir.PApp(op=op, args=args):
            return Call(egg_name(op), tuple(_pattern(a) for a in args))
        case _:
            assert_never(p)


def _rewrite(lang: ir.Language, rule: ir.Rule) -> tuple[list[Sexp], list[Sexp]]:
    """The rule's query and actions; the i-th left side's root class is `_lhs{i}`."""
    lw = _RuleLowering(lang)
    roots = _roots(rule)
    lw.query += [call("=", Var(r), _pattern(p)) for r, p in zip(roots, rule.lhs)]
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
        raise _lowering_error(f"rule '{rule.name}'", err, rule.span) from None
    actions: list[Sexp] = [call("union", Var(r), _pattern(p)) for r, p in zip(roots, rule.rhs)]
    return _prune_unused(lw.query, actions, lw.assumed), actions


def _roots(rule: ir.Rule) -> list[str]:
    return [f"_lhs{i}" for i in range(len(rule.lhs))]


def _rule_text(query: Sequence[Sexp], actions: Sequence[Sexp], ruleset: str, name: str) -> str:
    return f"(rule ({_show_all(query)})\n      ({_show_all(actions)})\n      :ruleset {ruleset} :name \"{name}\")"


def _sampled(lang: ir.Language, rule: ir.Rule, query: list[Sexp], actions: list[Sexp]) -> Sampled:
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
        _rule_text([*query, call("=", generation, Call(SAMPLE_GENERATION, ()))],
                   [Call("set", (Call(candidates, roots), generation))], record, f"{name}:record"),
        _rule_text([*query, Call(allowed, roots)], actions, gated, f"{name}:gated")])
    return Sampled(record, gated, candidates, allowed, sorts, text)


# The generation a recording belongs to: a recording rule reads it in its query, so setting a new
# value re-fires the rule on every current match, and rows of older generations are ignored
# (egglog 14 cannot clear a relation; recording inside push/pop instead copies the e-graph).
SAMPLE_GENERATION = "_sample_generation"


def _conditions(lw: _RuleLowering, rule: ir.Rule) -> None:
    var_sorts = _var_sorts(rule)
    for var in _var_names(rule):
        lw.env["?" + var] = Var(f"?{var}")
    for name, value in rule.wheres:
        _bind_shapes(lw, value, var_sorts)
        lw.query += bind_fields([value], lw.env, lambda: lw.fresh("f"))
        lw.query.append(call("=", Var(f"?{name}"), term(value, lw.env)))
        lw.env[name] = Var(f"?{name}")
    for cond in rule.conds:
        match cond:
            case ir.ExprCond(expr=e):
                _bind_shapes(lw, e, var_sorts)
                lw.query += bind_fields([e], lw.env, lambda: lw.fresh("f"))
                lw.query.extend(facts(e, lw.env))
            case ir.ClassCond(equal=eq, left=l, right=r):
                for side in (l, r):
                    if not eq and isinstance(side, ir.PApp) and _has_var(side):
                        raise Unlowerable("'!=' compares an e-class with a variable or a ground "
                                          "term, not a pattern with variables")
                lw.query.append(call("=" if eq else "!=", _pattern(l), _pattern(r)))
            case _:
                assert_never(cond)


def _has_var(p: ir.Pattern) -> bool:
    match p:
        case ir.PVar() | ir.PBound():
            return True
        case ir.PLit():
            return False
        case ir.PApp(args=args):
            return any(_has_var(a) for a in args)
        case _:
            assert_never(p)


def _var_names(rule: ir.Rule) -> set[str]:
    def walk(p: ir.Pattern) -> set[str]:
        match p:
            case ir.PVar(name=v):
                return {v}
            case ir.PApp(args=args):
                return set().union(*(walk(a) for a in args)) if args else set()
            case _:
                return set()

    return set().union(*(walk(p) for p in rule.lhs))


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


def _bind_shapes(lw: _RuleLowering, e: ir.Expr, var_sorts: dict[str, str]) -> None:
    for var in _shape_vars(e):
        if isinstance(var, ir.ShapeOfTerm):
            shape = _check_shape(lw, var.pattern)
            if shape is None:
                raise Unlowerable(f"shape({var.pattern!r}) reads a term whose operator has no shape rule")
            lw.env[term_shape_key(var)] = shape
        else:
            lw.shape_of_var(var, var_sorts[var])


def _shape_vars(e: ir.Expr) -> list[str | ir.ShapeOfTerm]:
    """Pattern variables (and right-side terms) whose shapes `e` reads."""
    match e:
        case ir.ShapeOf(var=v):
            return [v]
        case ir.ShapeOfTerm():
            return [e]
        case ir.Const() | ir.Ref():
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


def _check_shape(lw: _RuleLowering, p: ir.Pattern) -> Sexp | None:
    """Add the shape requirements of a right-side node; return its shape's egglog expression."""
    match p:
        case ir.PVar(name=v, type=ir.SortType(name=s)):
            return lw.shape_of_var(v, s) if lw.lang.sorts[s].shape_type is not None else None
        case ir.PApp(op=op_name, args=args):
            key = _pattern(p)
            if key not in lw.rhs_shapes:
                lw.rhs_shapes[key] = _check_app_shape(lw, op_name, args)
            return lw.rhs_shapes[key]
        case _:  # a value-typed variable or a literal is its own "shape"
            return _pattern(p)


def _check_app_shape(lw: _RuleLowering, op_name: str, args: tuple[ir.Pattern, ...]) -> Sexp | None:
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


def _groups(lang: ir.Language) -> list[str]:
    single = " ".join(ruleset_of(r) for r in lang.single_rules)
    multi = " ".join(ruleset_of(r) for r in lang.multi_rules)
    out = [";; ---- groups ----"]
    for name, members in (("single", single), ("multi", multi)):
        out.append(f"(unstable-combined-ruleset {name} {members})" if members else f"(ruleset {name})")
    out.append("(unstable-combined-ruleset all single multi)")
    return out


def load_program(program: ir.Program, lowered: Lowered) -> str:
    """One rule with local lets (fast for big programs), run once; roots marked by relation."""
    lang = lowered.language
    actions = _node_lets(program, "_n")
    # `?x != num(0)` is a join in egglog: the ground term must exist for the test to mean anything.
    actions += [f"(let _g{i} {t})" for i, t in enumerate(_ground_condition_terms(lang))]
    for k, root in enumerate(program.roots):
        actions.append(f"({root_rel(lang.ops[program.nodes[root].op].result)} _n{root} {k})")
    return _run_once(actions, program.name)


def union_text(program: ir.Program, alternatives: tuple[ir.Program, ...], lowered: Lowered) -> str:
    """Add each alternative and union its roots with `program`'s, in order (`program` is rebuilt
    by its lets: the same terms, so the classes it is already in). Raises `EqdslError` when an
    alternative's roots do not match `program`'s in number and sort."""
    ops = lowered.language.ops
    actions = _node_lets(program, "_n")
    for j, alt in enumerate(alternatives):
        sorts = [ops[alt.nodes[r].op].result for r in alt.roots]
        if sorts != [ops[program.nodes[r].op].result for r in program.roots]:
            raise EqdslError.one(f"alternative program '{alt.name}' has roots of sorts {sorts}; expected "
                                 f"those of '{program.name}', in the same order")
        actions += _node_lets(alt, f"_a{j}_")
        actions += [f"(union _n{r} _a{j}_{a})" for r, a in zip(program.roots, alt.roots)]
    return _run_once(actions, f"{program.name}+alternatives")


def _node_lets(program: ir.Program, prefix: str) -> list[str]:
    lets = []
    for i, node in enumerate(program.nodes):
        args = " ".join(f"{prefix}{a.index}" if isinstance(a, ir.Child) else show(literal(a)) for a in node.args)
        lets.append(f"(let {prefix}{i} ({egg_name(node.op)}{' ' + args if args else ''}))")
    return lets


def _run_once(actions: list[str], name: str) -> str:
    return (f"(rule () ({' '.join(actions)}) :ruleset load :name \"load:{name}\")\n"
            f"(run load 1)\n")


def _ground_condition_terms(lang: ir.Language) -> list[str]:
    terms = {show(_pattern(side)) for rule in lang.rules for cond in rule.conds
             if isinstance(cond, ir.ClassCond) for side in (cond.left, cond.right)
             if isinstance(side, ir.PApp) and not _has_var(side)}
    return sorted(terms)
