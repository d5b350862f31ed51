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
from dataclasses import dataclass, field
from typing import assert_never

from eqdsl import ir
from eqdsl.diagnostics import EqdslError
from eqdsl.egglog.names import (
    PRIM_SORTS,
    USER_RULESET,
    VEC_SORT,
    Sampled,
    egg_name,
    lowering_error,
    probe_names,
    root_rel,
    ruleset_of,
    shape_fn,
)
from eqdsl.egglog.rules import SAMPLE_GENERATION, has_var, pattern, rewrite, rule_text, sampled_form, show_all
from eqdsl.egglog.sexp import Call, Sexp, Var, call, show
from eqdsl.egglog.terms import Unlowerable, bind_fields, facts, literal, term


@dataclass(frozen=True)
class Lowered:
    language: ir.Language
    text: str
    op_of_egg: dict[str, str]  # egglog constructor name → eqdsl operator
    analysis_fns: frozenset[str]  # the shape functions (`_shape_SORT`)
    root_rels: frozenset[str]
    rulesets: dict[str, str] = field(default_factory=dict)  # rule name → ruleset
    sampled: dict[str, Sampled] = field(default_factory=dict)  # multi-pattern rule name → its sampled form
    before_blocks: str = ""  # the text up to the `egglog { }` blocks (`egglog.blocks` runs each after it)
    analyses: dict[str, str] = field(default_factory=dict)  # egglog function → the `analysis` it holds

    @functools.cached_property
    def bookkeeping(self) -> frozenset[str]:
        """Tables that are not part of the program's e-graph (the sampled forms' rows, analyses)."""
        return frozenset([SAMPLE_GENERATION, *(r for s in self.sampled.values() for r in (s.candidates, s.allowed)),
                          *self.analyses])


def lower_language(lang: ir.Language) -> Lowered:
    probe_names([*lang.ops, *lang.analyses])
    sections = [f";; eqdsl language {lang.name}", *_declarations(lang)]
    sections.append(";; ---- shape analysis ----")
    sections.extend(_shape_rule(lang, r) for r in lang.shapes.values())
    for analysis in lang.analyses.values():
        sections.append(f";; ---- analysis {analysis.name} ----")
        sections.extend(_analysis_rule(lang, analysis, r) for r in analysis.rules.values())
    sections.append(";; ---- rewrite rules ----")
    sampled: dict[str, Sampled] = {}
    for rule in lang.rules:
        sections.append(f"(ruleset {ruleset_of(rule)})")
        query, actions = rewrite(lang, rule)
        sections.append(rule_text(query, actions, ruleset_of(rule), rule.name))
        if rule.is_multi and all(isinstance(p, ir.PApp) for p in rule.lhs):
            sampled[rule.name] = sampled_form(lang, rule, query, actions)
    if lang.egglog:  # the author's own egglog, verbatim, after what eqdsl declared; its rules go in `user`
        sections.append(f"(ruleset {USER_RULESET})")
    before_blocks = "\n".join(sections) + "\n"
    for text, span in lang.egglog:
        sections += [f";; ---- egglog block at {span.file}:{span.line} ----", text.strip()]
    sections.extend(_groups(lang))
    shaped = [s for s in lang.sorts.values() if s.shape_type is not None]
    return Lowered(
        lang, "\n".join(sections) + "\n",
        {egg_name(o): o for o in lang.ops},
        frozenset(shape_fn(s.name) for s in shaped),
        frozenset(root_rel(s) for s in lang.sorts),
        {r.name: ruleset_of(r) for r in lang.rules},
        sampled,
        before_blocks,
        {egg_name(a): a for a in lang.analyses},
    )


def rule_command(lang: ir.Language, rule: ir.Rule, ruleset: str) -> str:
    """One single-pattern rule as an egglog `rule` command in `ruleset`: how a prover grows its
    rule set in a declared e-graph (`synth.derive.Prover.add`) instead of declaring it again."""
    query, actions = rewrite(lang, rule)
    return rule_text(query, actions, ruleset, rule.name)


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
    out += [_analysis_function(a) for a in lang.analyses.values()]
    return out


def _analysis_function(analysis: ir.Analysis) -> str:
    """A partial function: unset until a rule sets it. `merge agree` is egglog's `:no-merge`, under
    which two different values for one e-class stop the run (see `session._hint`)."""
    if analysis.merge is None:
        merge = ":no-merge"
    else:
        merge = f":merge {show(term(analysis.merge, {'old': Var('old'), 'new': Var('new')}))}"
    return f"(function {egg_name(analysis.name)} ({analysis.sort}) {PRIM_SORTS[analysis.type]} {merge})"


def _egg_type(t: ir.ValueType) -> str:
    match t:
        case ir.SortType(name=n):
            return n
        case ir.Prim() as p:
            return PRIM_SORTS[p]
        case _:
            assert_never(t)


def _shape_rule(lang: ir.Language, rule: ir.ShapeRule) -> str:
    def child_value(sort: str) -> str | None:
        return shape_fn(sort) if lang.sorts[sort].shape_type is not None else None

    return _value_rule(lang, rule, child_value, shape_fn(lang.ops[rule.op].result), f"shape:{rule.op}",
                       f"the shape rule of '{rule.op}'")


def _analysis_rule(lang: ir.Language, analysis: ir.Analysis, rule: ir.ShapeRule) -> str:
    def child_value(sort: str) -> str | None:
        return egg_name(analysis.name) if sort == analysis.sort else None

    # the value is computed in the query: where an i64 primitive fails there (3 * 2^62 overflows)
    # the rule does not match and the value stays unset; in the action egglog would panic
    return _value_rule(lang, rule, child_value, egg_name(analysis.name), f"{analysis.name}:{rule.op}",
                       f"the rule of analysis '{analysis.name}' for '{rule.op}'", in_query=True)


def _value_rule(lang: ir.Language, rule: ir.ShapeRule, child_value, result_fn: str,
                name: str, what: str, in_query: bool = False) -> str:
    """`(set (result_fn e) body)` for every application `e` of the rule's operator whose children
    have values (`child_value(sort)`: the function that holds a child's value, or None where the
    parameter is read as it is) and whose requirements hold (and, `in_query`, whose body evaluates)."""
    op = lang.ops[rule.op]
    env: dict[str, Sexp] = {}
    args: list[Sexp] = []
    child_facts: list[Sexp] = []
    for param_name, param in zip(rule.params, op.params):
        env[param_name] = Var(param_name)
        fn = child_value(param.type.name) if isinstance(param.type, ir.SortType) else None
        if fn is None:
            args.append(Var(param_name))
        else:
            args.append(Var(f"_c_{param_name}"))
            child_facts.append(call("=", Var(param_name), call(fn, Var(f"_c_{param_name}"))))
    names = (f"_f{i}" for i in itertools.count())
    try:
        fields = bind_fields([*rule.requires, rule.body], env, lambda: next(names))
        requires = [f for r in rule.requires for f in facts(r, env)]
        body = term(rule.body, env)
    except Unlowerable as err:
        raise lowering_error(what, err, rule.span) from None
    query = [call("=", Var("_e"), Call(egg_name(op.name), tuple(args))), *child_facts, *fields, *requires]
    if in_query:
        query, body = [*query, call("=", Var("_value"), body)], Var("_value")
    return (f"(rule ({show_all(query)})\n      ((set ({result_fn} _e) {show(body)}))\n"
            f"      :ruleset analysis :name \"{name}\")")


def _groups(lang: ir.Language) -> list[str]:
    single = " ".join([*(ruleset_of(r) for r in lang.single_rules), *([USER_RULESET] if lang.egglog else [])])
    multi = " ".join(ruleset_of(r) for r in lang.multi_rules)
    out = [";; ---- groups ----"]
    for name, members in (("single", single), ("multi", multi)):
        out.append(f"(unstable-combined-ruleset {name} {members})" if members else f"(ruleset {name})")
    out.append("(unstable-combined-ruleset all single multi)")
    return out


Facts = tuple[tuple[str, int], ...]  # (Bool analysis, node index) set true when a program loads: assumptions


def load_program(program: ir.Program, lowered: Lowered, facts: Facts = ()) -> str:
    """One rule with local lets (fast for big programs), run once; roots marked by relation. Each
    fact `(analysis, node)` sets that Bool analysis true on the node's e-class (an assumption)."""
    lang = lowered.language
    actions = _node_lets(program, "_n")
    actions += [f"(set ({egg_name(name)} _n{node}) true)" for name, node in facts]
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
    terms = {show(pattern(side)) for rule in lang.rules for cond in rule.conds
             if isinstance(cond, ir.ClassCond) for side in (cond.left, cond.right)
             if isinstance(side, ir.PApp) and not has_var(side)}
    return sorted(terms)
