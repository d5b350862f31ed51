"""Evaluate shape-rule expressions over unknown sizes, to construct shapes that satisfy them.

Contract: `SymEval(backend).value(e, env)` evaluates a typed `ir.Expr` where ints may be unknown.
Lists always have a known length (ranks are chosen first). Known parts are computed in Python with
the same rules as `eqdsl.ir.evaluate`; unknown parts go to the backend: `NullBackend` (ranks
only: every unknown is None) or `CpBackend` (CP-SAT variables and reified constraints, so a solve
gives sizes meeting every requirement). `Infeasible` means a requirement is false whatever the
unknowns are, e.g. an index past a list's end or `len(a) == len(b)` with different ranks.
"""
from __future__ import annotations

from typing import Any, assert_never

from eqdsl import ir
from eqdsl.ir.evaluate import BINARY_OPS as CONCRETE_BINOPS
from eqdsl.ir.evaluate import EvalError, field_of
from eqdsl.ir.exprs import env_key

BIG = 10 ** 6


class Infeasible(Exception):
    pass


def known(v: Any) -> bool:
    return isinstance(v, (int, bool, str))


class NullBackend:
    """Ranks only: every unknown int or bool stays None."""

    def arith(self, op: str, a, b):
        return None

    def compare(self, op: str, a, b):
        return None

    def both(self, a, b):
        return None

    def negate(self, a):
        return None

    def element(self, items: list, index):
        return None

    def replace(self, items: list, index, value) -> list:
        return [None] * len(items)

    def require(self, b) -> None:
        pass


class CpBackend:
    """CP-SAT: unknown ints are linear expressions, unknown bools are literals."""

    def __init__(self) -> None:
        from ortools.sat.python import cp_model  # on first use: `eqdsl check` never loads OR-Tools

        self.model = cp_model.CpModel()

    def int_var(self, lo: int, hi: int, name: str = ""):
        return self.model.new_int_var(lo, hi, name)

    def _fresh(self):
        return self.model.new_int_var(-BIG, BIG, "")

    def arith(self, op: str, a, b):
        m = self.model
        if op in ("add", "sub"):
            return a + b if op == "add" else a - b
        if op == "mul" and (known(a) or known(b)):
            return a * b
        out = self._fresh()
        if op == "mul":
            m.add_multiplication_equality(out, [a, b])
        elif op in ("div", "mod"):
            denom = m.new_int_var(1, BIG, "")  # sizes and strides divide: positive denominators only
            m.add(denom == b)
            (m.add_division_equality if op == "div" else m.add_modulo_equality)(out, a, denom)
        elif op in ("min", "max"):
            (m.add_min_equality if op == "min" else m.add_max_equality)(out, [a, b])
        else:
            raise AssertionError(op)
        return out

    def compare(self, op: str, a, b):
        lit = self.model.new_bool_var("")
        holds, fails = {"eq": (a == b, a != b), "ne": (a != b, a == b), "lt": (a < b, a >= b),
                        "le": (a <= b, a > b), "gt": (a > b, a <= b), "ge": (a >= b, a < b)}[op]
        self.model.add(holds).only_enforce_if(lit)
        self.model.add(fails).only_enforce_if(~lit)
        return lit

    def both(self, a, b):
        lit = self.model.new_bool_var("")
        self.model.add_bool_and([a, b]).only_enforce_if(lit)
        self.model.add_bool_or([~a, ~b]).only_enforce_if(~lit)
        return lit

    def negate(self, a):
        return ~a

    def element(self, items: list, index):
        out = self._fresh()
        self.model.add_element(index, items, out)
        return out

    def replace(self, items: list, index, value) -> list:
        """items with [index] = value for an unknown index: position i takes value iff index == i."""
        self.model.add(index >= 0)
        self.model.add(index < len(items))
        out = []
        for i, item in enumerate(items):
            here, new = self.compare("eq", index, i), self._fresh()
            self.model.add(new == value).only_enforce_if(here)
            self.model.add(new == item).only_enforce_if(~here)
            out.append(new)
        return out

    def require(self, b) -> None:
        self.model.add_bool_and([b])


class SymEval:
    def __init__(self, backend: NullBackend | CpBackend) -> None:
        self.b = backend

    # ---- booleans with known parts folded ----
    def both(self, x, y):
        if x is False or y is False:
            return False
        if x is True:
            return y
        if y is True:
            return x
        return None if x is None or y is None else self.b.both(x, y)

    def either(self, x, y):
        return self.negate(self.both(self.negate(x), self.negate(y)))

    def negate(self, x):
        return (not x) if isinstance(x, bool) else (None if x is None else self.b.negate(x))

    def all_of(self, items) -> Any:
        result = True
        for x in items:
            result = self.both(result, x)
        return result

    def require(self, cond) -> None:
        if cond is False:
            raise Infeasible()
        if cond is not True and cond is not None:
            self.b.require(cond)

    # ---- ints ----
    def arith(self, op: str, a, b):
        if known(a) and known(b):
            if op in ("div", "mod") and b == 0:
                raise Infeasible()
            return {"min": min, "max": max}[op](a, b) if op in ("min", "max") else CONCRETE_BINOPS[op](a, b)
        return None if a is None or b is None else self.b.arith(op, a, b)

    def compare(self, op: str, a, b):
        if isinstance(a, list) or isinstance(b, list):
            return self._compare_lists(op, a, b)
        if known(a) and known(b):
            return CONCRETE_BINOPS[op](a, b)
        return None if a is None or b is None else self.b.compare(op, a, b)

    def _compare_lists(self, op: str, a: list, b: list):
        if op not in ("eq", "ne"):
            raise Infeasible()
        same = len(a) == len(b) and self.all_of(self.compare("eq", x, y) for x, y in zip(a, b))
        return same if op == "eq" else self.negate(same)

    def index(self, items: list, i):
        if known(i):
            if not -len(items) <= i < len(items):
                raise Infeasible()
            return items[i]
        return None if i is None else self.b.element(items, i)

    def replace(self, items: list, i, v) -> list:
        if not known(i):
            return [None] * len(items) if i is None else self.b.replace(items, i, v)
        self.index(items, i)  # range check
        out = list(items)
        out[i] = v
        return out

    # ---- expressions ----
    def value(self, e: ir.Expr, env: dict[str, Any]) -> Any:
        match e:
            case ir.Const(value=tuple() as v):
                return list(v)
            case ir.Const(value=v):
                return v
            case ir.Ref() | ir.ShapeOf() | ir.ShapeOfTerm() | ir.AnalysisOf():
                return env[env_key(e)]
            case ir.Builtin(fn=fn, args=args):
                return self._builtin(fn, [self.value(a, env) for a in args])
            case ir.BinOp(op="and", left=l, right=r):
                return self.both(self.value(l, env), self.value(r, env))
            case ir.BinOp(op="or", left=l, right=r):
                return self.either(self.value(l, env), self.value(r, env))
            case ir.BinOp(op="cat", left=l, right=r):
                return list(self.value(l, env)) + list(self.value(r, env))
            case ir.BinOp(op=op, left=l, right=r) if op in ("eq", "ne", "lt", "le", "gt", "ge"):
                return self.compare(op, self.value(l, env), self.value(r, env))
            case ir.BinOp(op=op, left=l, right=r):
                return self.arith(op, self.value(l, env), self.value(r, env))
            case ir.UnOp(op="neg", arg=a):
                return self.arith("sub", 0, self.value(a, env))
            case ir.UnOp(arg=a):
                return self.negate(self.value(a, env))
            case ir.ListOf(items=items):
                return [self.value(i, env) for i in items]
            case ir.IndexOf(base=b, index=i):
                return self.index(self.value(b, env), self.value(i, env))
            case ir.SliceOf(base=b, lo=lo, hi=hi):
                return list(self.value(b, env))[lo:hi]
            case ir.FieldOf(base=b, index=k):
                try:  # a two-field value's length prefix is always known (examples fix it)
                    return list(field_of(list(self.value(b, env)), k))
                except EvalError:
                    raise Infeasible() from None
            case ir.Replace(base=b, index=i, value=v):
                return self.replace(self.value(b, env), self.value(i, env), self.value(v, env))
            case _:
                assert_never(e)

    def _builtin(self, fn: str, args: list) -> Any:
        match fn, args:
            case "len", [xs]:
                return len(xs)
            case ("prod" | "sum"), [xs]:
                result = 1 if fn == "prod" else 0
                for x in xs:
                    result = self.arith("mul" if fn == "prod" else "add", result, x)
                return result
            case ("min" | "max"), [a, b]:
                return self.arith(fn, a, b)
            case "broadcasts", [b, a]:
                if not len(b) <= len(a):
                    return False
                tail = a[len(a) - len(b):]
                return self.all_of(self.either(self.compare("eq", x, 1), self.compare("eq", x, y))
                                   for x, y in zip(b, tail))
            case "is_perm", [p]:
                bounds = [self.both(self.compare("ge", x, 0), self.compare("lt", x, len(p))) for x in p]
                distinct = [self.compare("ne", x, y) for i, x in enumerate(p) for y in p[i + 1:]]
                return self.all_of(bounds + distinct)
            case "positive", [xs]:
                return self.all_of([len(xs) >= 1] + [self.compare("ge", x, 1) for x in xs])
            case "remove", [xs, i]:
                if not known(i) or not 0 <= i < len(xs):
                    raise Infeasible()  # (Ints that index lists are enumerated: see examples.pinned)
                return list(xs[:i]) + list(xs[i + 1:])
            case "permute", [x, p]:
                if len(p) != len(x):
                    raise Infeasible()
                return [self.index(x, i) for i in p]
            case _:
                raise AssertionError(fn)
