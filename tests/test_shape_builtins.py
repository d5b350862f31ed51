"""Shape builtins (broadcasts, permute, is_perm, prod): egglog's unrolled lowering agrees with the
Python evaluator the model builders use, including past MAX_RANK where egglog must refuse."""
from __future__ import annotations

import itertools
import random

import pytest
from egglog import bindings

from eqdsl import ir
from eqdsl.egglog.lower import VEC_SORT
from eqdsl.egglog.sexp import Var, show
from eqdsl.egglog.terms import MAX_RANK, facts, literal
from eqdsl.ir.evaluate import EvalError, evaluate

INTS, BOOL = ir.Prim.INTS, ir.Prim.BOOL
A, B = ir.Ref("a", INTS), ir.Ref("b", INTS)
ENV = {"a": Var("?a"), "b": Var("?b")}


def _egglog_holds(cond: ir.Expr, cases: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> list[bool]:
    """Which (a, b) pairs satisfy `cond` inside an egglog query."""
    rows = "\n".join(f"(R {show(literal(a))} {show(literal(b))} {i})" for i, (a, b) in enumerate(cases))
    query = " ".join(show(f) for f in facts(cond, ENV))
    program = (f"(sort {VEC_SORT} (Vec i64))\n(relation R ({VEC_SORT} {VEC_SORT} i64))\n"
               f"(relation S (i64))\n{rows}\n(rule ((R ?a ?b ?i) {query}) ((S ?i)))\n(run 1)\n")
    eg = bindings.EGraph()
    eg.run_program(*eg.parse_program(program))
    held = set()
    for i in range(len(cases)):
        try:
            eg.run_program(*eg.parse_program(f"(check (S {i}))"))
            held.add(i)
        except bindings.EggSmolError:
            pass
    return [i in held for i in range(len(cases))]


def _python_holds(cond: ir.Expr, a, b) -> bool:
    try:
        return bool(evaluate(cond, {"a": a, "b": b}))
    except EvalError:
        return False


def _shapes(rng: random.Random, n: int) -> list[tuple[int, ...]]:
    return [tuple(rng.choice([1, 2, 3]) for _ in range(rng.randint(0, MAX_RANK + 1))) for _ in range(n)]


def test_broadcasts_agrees_with_python():
    rng = random.Random(0)
    cases = [(a, b) for a, b in zip(_shapes(rng, 300), _shapes(rng, 300))]
    cases += [((2, 3, 4), (3, 1)), ((2, 3, 4), (4,)), ((3, 4), (2, 3, 4)), ((4,), (5,)), ((1,) * 9, (1,))]
    cond = ir.Builtin("broadcasts", (B, A), BOOL)
    expected = [_python_holds(cond, a, b) for a, b in cases]
    assert _egglog_holds(cond, cases) == expected
    assert sum(expected) > 20 and expected[-5:] == [True, True, False, False, True]


def test_permute_and_is_perm_agree_with_python():
    rng = random.Random(1)
    cases = []
    for rank in range(1, MAX_RANK + 2):
        x = tuple(rng.randint(1, 9) for _ in range(rank))
        perms = [tuple(rng.sample(range(rank), rank)) for _ in range(3)]
        perms += [tuple(rng.randint(-1, rank) for _ in range(rank)), tuple(range(rank - 1))]
        cases += [(x, p) for p in perms]
    for x, p in cases:
        is_perm = ir.Builtin("is_perm", (B,), BOOL)
        assert _python_holds(is_perm, x, p) == (sorted(p) == list(range(len(p))) and len(p) <= MAX_RANK)
    both = ir.BinOp("and", ir.Builtin("is_perm", (B,), BOOL), ir.BinOp(
        "eq", ir.Builtin("len", (B,), ir.Prim.INT), ir.Builtin("len", (A,), ir.Prim.INT), BOOL), BOOL)
    expected = [_python_holds(both, x, p) for x, p in cases]
    assert _egglog_holds(both, cases) == expected
    assert any(expected) and not all(expected)


def test_permute_computes_the_permuted_shape_in_egglog():
    rng = random.Random(2)
    cases = []
    for rank in range(1, MAX_RANK + 1):
        x = tuple(rng.randint(1, 9) for _ in range(rank))
        p = tuple(rng.sample(range(rank), rank))
        cases.append((tuple(x[i] for i in p), x, p))
    for want, x, p in cases:
        cond = ir.BinOp("eq", ir.Builtin("permute", (A, B), INTS), ir.Const(want, INTS), BOOL)
        assert _egglog_holds(cond, [(x, p)]) == [True], (x, p)
        wrong = ir.BinOp("eq", ir.Builtin("permute", (A, B), INTS), ir.Const(x, INTS), BOOL)
        assert _egglog_holds(wrong, [(x, p)]) == [want == x]


def test_prod_agrees_with_python_and_refuses_past_max_rank():
    cases = [((2, 3, 4), (24,)), ((2, 3, 4), (6, 4)), ((5,), (4,)), ((2,) * MAX_RANK, (2 ** MAX_RANK,)),
             ((1,) * (MAX_RANK + 1), (1,)), ((), (1,))]
    cond = ir.BinOp("eq", ir.Builtin("prod", (A,), ir.Prim.INT), ir.Builtin("prod", (B,), ir.Prim.INT), BOOL)
    assert _egglog_holds(cond, cases) == [True, True, False, True, False, True]
    assert list(itertools.starmap(lambda a, b: _python_holds(cond, a, b), cases))[:4] == [True, True, False, True]


def test_every_builtin_has_its_meaning_in_each_layer():
    """One table (eqdsl.ir.builtins): egglog lowers exactly the builtins marked `in_egglog`, the
    evaluator runs every one that is not sugar, and the checker knows no other name."""
    from eqdsl.egglog.terms import LOWERINGS
    from eqdsl.ir.builtins import BUILTINS, SUGAR

    assert set(LOWERINGS) == {n for n, spec in BUILTINS.items() if spec.in_egglog and n not in SUGAR}
    assert all(spec.evaluate is not None for n, spec in BUILTINS.items() if n not in SUGAR)
    assert SUGAR == {"items", "split_at"}


def test_stream_moves_the_first_kilobytes_at_the_cache_bandwidth():
    """`stream(bytes, kb, fast, slow)`: the cost rules' memory time; kb 0 is the plain roofline
    `bytes / slow`, so targets without a cache tier price as before."""
    from eqdsl.ir.builtins import EvalError, stream

    assert stream(12_000, 0, 0, 40) == 12_000 // 40
    assert stream(4096, 8, 100, 10) == 4096 // 100  # all of it in the cache
    assert stream(3 * 1024, 1, 8, 2) == 1024 // 8 + 2048 // 2
    with pytest.raises(EvalError):
        stream(4096, 1, 0, 10)
