"""Typed configuration fields read from YAML, with errors that name the YAML path.

Contract: a config section is a frozen dataclass whose fields are made with `option(default,
check, expected, convert)`; `read_section(cls, data, path)` returns an instance or raises
`EqdslError` naming the bad key (`schedule.k_multi: expected an int ≥ 0, got 'one'`). Unknown
keys are errors. `check` and `expected` may read a registry at call time, so a kind registered
later (a plugin, a test) is accepted and listed.
"""
from __future__ import annotations

import math
from dataclasses import MISSING, field, fields
from typing import Any, Callable

from eqdsl.diagnostics import EqdslError

Check = Callable[[Any], bool]
Expected = str | Callable[[], str]


def option(default: Any, check: Check, expected: Expected, convert: Callable[[Any], Any] | None = None) -> Any:
    """A dataclass field readable from YAML (`read_section`)."""
    return field(default=default, metadata={"check": check, "expected": expected, "convert": convert})


def fail(path: str, expected: str, got: Any) -> EqdslError:
    return EqdslError.one(f"expected {expected}, got {got!r}", path=path)


REQUIRED = object()


class Reader:
    """Reads one mapping, remembering which keys were used so unknown ones can be reported."""

    def __init__(self, data: Any, path: str) -> None:
        if not isinstance(data, dict):
            raise fail(path or "<top level>", "a mapping", data)
        self.data, self.path, self.used = data, path, set[str]()

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, default: Any, check: Check, expected: Expected) -> Any:
        self.used.add(key)
        wanted = expected() if callable(expected) else expected
        if key not in self.data:
            if default is REQUIRED:
                raise EqdslError.one(f"missing required key; expected {wanted}", path=self.at(key))
            return default
        value = self.data[key]
        if not check(value):
            raise fail(self.at(key), wanted, value)
        return value

    def unknown(self) -> list[str]:
        return sorted(str(k) for k in self.data if k not in self.used)

    def finish(self) -> None:
        unknown = self.unknown()
        if unknown:
            raise EqdslError.one(f"unknown key; expected one of: {', '.join(sorted(self.used))}",
                                 path=self.at(unknown[0]))


def read_fields(cls: type, reader: Reader, **fixed: Any) -> Any:
    """An instance of the dataclass `cls` from `reader`'s mapping (the caller calls `finish`)."""
    values = dict(fixed)
    for f in fields(cls):
        if f.name in fixed or "check" not in f.metadata:
            continue
        default = f.default if f.default is not MISSING else REQUIRED
        value = reader.get(f.name, default, f.metadata["check"], f.metadata["expected"])
        convert = f.metadata["convert"]
        values[f.name] = convert(value) if convert is not None else value
    return cls(**values)


def read_section(cls: type, data: Any, path: str) -> Any:
    reader = Reader(data if data is not None else {}, path)
    section = read_fields(cls, reader)
    reader.finish()
    return section


def int_at_least(n: int) -> Check:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= n


def positive_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and math.isfinite(v)


def is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def one_of(options: tuple[str, ...] | Callable[[], Any]) -> Check:
    """`options` may be a registry read at call time (anything supporting `in` after the call)."""
    return lambda v: isinstance(v, str) and v in (options() if callable(options) else options)


def names(options: Callable[[], Any]) -> Callable[[], str]:
    return lambda: ", ".join(options())
