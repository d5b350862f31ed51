"""Typed configuration fields read from YAML, with errors that name the YAML path.

Contract: a config section is a frozen dataclass whose fields are made with `option(default,
check, expected, convert)`; `read_fields(cls, reader)` returns an instance or raises
`EqdslError` naming the bad key (`schedule.k_multi: expected an int ≥ 0, got 'one'`), and
`read_section(data, cls, path, shorthand)` reads a whole optional section (`false`, `true`, a
mapping, or a shorthand string: `execute: cuda`) that way. Unknown keys are errors. `check` and
`expected` may read a registry at call time, so a kind registered later (a plugin, a test) is accepted and listed.

`load_yaml(text, file)` is the one way eqdsl reads a YAML file: safe tags only, aliases bounded
(a document that expands to more than `MAX_YAML_NODES` nodes, a "billion laughs", or refers to
itself is refused before anything is built), `1e3` read as a number (YAML 1.2), a duplicate key
refused, syntax errors as `file:line:col`. Values shown in
messages are cut short (`shown`), so a large value never makes a huge message.
"""
from __future__ import annotations

import argparse
import math
import re
import reprlib
from dataclasses import MISSING, field, fields
from typing import Any, Callable

import yaml

from eqdsl.diagnostics import EqdslError

MAX_YAML_NODES = 1_000_000
_SHOWN = reprlib.Repr(maxlevel=3, maxlist=8, maxdict=8, maxstring=80, maxother=80)


def shown(value: Any) -> str:
    """`repr(value)`, cut short: a few items per level, a few levels."""
    return _SHOWN.repr(value)


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, with YAML 1.2's floats (`1e3`, which YAML 1.1 reads as text) and
    duplicate mapping keys refused (YAML leaves them undefined; PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: PyYAML's own error follows
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r} (first at line "
                                                        f"{seen[key].start_mark.line + 1})", key_node.start_mark)
            seen[key] = key_node
        return super().construct_mapping(node, deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def load_yaml(text: str, file: str) -> Any:
    """The YAML document in `text` (see the module docstring); `EqdslError` naming `file`."""
    try:
        loader = _Loader(text)  # reads the text at once: a control character fails here
    except yaml.reader.ReaderError as err:
        raise EqdslError.one(f"{file}: invalid YAML: character {err.character!r} at offset {err.position} is not "
                             "allowed (YAML is printable text)") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node)
        if size is None:
            raise EqdslError.one(f"{file}: expected YAML whose aliases do not refer to themselves; found a "
                                 "recursive alias")
        if size > MAX_YAML_NODES:
            raise EqdslError.one(f"{file}: expected a YAML document of at most {MAX_YAML_NODES:,} values once "
                                 "its aliases are expanded; found more (aliases nested in aliases)")
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else file
        raise EqdslError.one(f"{where}: invalid YAML: {getattr(err, 'problem', None) or err}") from None
    except RecursionError:
        raise EqdslError.one(f"{file}: expected YAML nested at most a few hundred levels deep") from None
    finally:
        loader.dispose()


def _expanded_size(root: yaml.Node) -> int | None:
    """How many nodes `root` holds with every alias expanded (shared nodes counted each time they
    are reached), stopping early past the limit; None for a node that contains itself."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = min(1 + sum(sizes[id(c)] for c in children), MAX_YAML_NODES + 1)
            continue
        if id(node) in open_nodes:
            return None
        open_nodes.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                return None
            stack.append((child, False))
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []

Check = Callable[[Any], bool]
Expected = str | Callable[[], str]


def option(default: Any, check: Check, expected: Expected, convert: Callable[[Any], Any] | None = None,
           help: str = "", flag: str | None = "") -> Any:
    """A dataclass field readable from YAML (`read_section`) and, with `add_flags`, from a command
    line: `help` is the flag's help text; `flag` its name (`""`: `--field-name`; None: no flag)."""
    return field(default=default, metadata={"check": check, "expected": expected, "convert": convert,
                                            "help": help, "flag": flag})


def fail(path: str, expected: str, got: Any) -> EqdslError:
    return EqdslError.one(f"expected {expected}, got {shown(got)}", path=path)


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
            import difflib

            close = difflib.get_close_matches(unknown[0], sorted(self.used), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise EqdslError.one(f"unknown key; expected one of: {', '.join(sorted(self.used))}{hint}",
                                 path=self.at(unknown[0]))


def read_section(data: Any, cls: type, path: str, shorthand: str | None = None) -> Any:
    """A `key: false | true | {field: value, ...}` section of the dataclass `cls` (its `option`
    fields), or with `shorthand` also a string meaning `{shorthand: string}`: None for false or
    absent, `cls`'s defaults for true, else the fields read and checked, unknown keys refused."""
    if data is None or data is False:
        return None
    if data is True:
        return cls()
    if isinstance(data, str) and shorthand is not None:
        data = {shorthand: data}
    keys = "/".join(f.name for f in fields(cls) if "check" in f.metadata)
    if not isinstance(data, dict):
        raise fail(path, f"true/false{', a ' + shorthand if shorthand else ''} or a mapping with {keys}", data)
    reader = Reader(data, path)
    value = read_fields(cls, reader)
    reader.finish()
    return value


def read_fields(cls: type, reader: Reader, **fixed: Any) -> Any:
    """An instance of the dataclass `cls` from `reader`'s mapping (the caller calls `finish`)."""
    values = dict(fixed)
    problems: list = []  # every bad field is reported, not only the first
    for f in fields(cls):
        if f.name in fixed or "check" not in f.metadata:
            continue
        default = f.default if f.default is not MISSING else REQUIRED
        try:
            value = reader.get(f.name, default, f.metadata["check"], f.metadata["expected"])
        except EqdslError as err:
            problems += err.diagnostics
            continue
        convert = f.metadata["convert"]
        values[f.name] = convert(value) if convert is not None else value
    if problems:
        raise EqdslError(problems)
    return cls(**values)


def add_flags(parser: argparse.ArgumentParser, cls: type, taken: set[str], owner: str = "") -> None:
    """One command-line flag per `option` field of `cls` that has one and whose key is not in
    `taken` (a key two sections share is one flag); its value reaches `flag_values` as YAML would
    give it, checked by the field's own check. `taken` gains the keys added; `owner` starts each
    help text (the kind the options belong to)."""
    for f in fields(cls):
        flag = f.metadata.get("flag", None) if "check" in f.metadata else None
        if flag is None or f.name in taken:
            continue
        taken.add(f.name)
        wanted = f.metadata["expected"]
        text = f"{owner}{': ' if owner else ''}{f.metadata['help']} (default: {yaml_text(f.default)})"
        if isinstance(f.default, bool):
            parser.add_argument(flag or "--" + f.name.replace("_", "-"), dest=f.name, help=text,
                                action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS)
            continue
        parser.add_argument(flag or "--" + f.name.replace("_", "-"), dest=f.name, help=text,
                            type=_flag_parser(f.metadata["check"], wanted), default=argparse.SUPPRESS,
                            metavar=_metavar(wanted))


def flag_values(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The `option` fields of `cls` given on the command line (`add_flags`), by key."""
    return {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name) and "check" in f.metadata}


def _metavar(expected: Expected) -> str:
    """`{a,b,c}` for "one of a, b, c" (the choices listed, as argparse shows them); else VALUE."""
    text = expected() if callable(expected) else expected
    if text.startswith("one of "):
        return "{" + text[len("one of "):].replace(", or ", ",").replace(", ", ",") + "}"
    return "VALUE"


def yaml_text(value: Any) -> str:
    """A scalar as YAML writes it (`null`, `false`, `onnx`); anything else as `shown`."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return shown(value)


def _flag_parser(check: Check, expected: Expected) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = yaml.load(text, Loader=_Loader)  # YAML 1.2 floats, as in a config file: 1e3
        except yaml.YAMLError:
            value = text
        if not check(value) and check(text):  # a name YAML reads otherwise ("null" stays a string)
            value = text
        if not check(value):
            raise argparse.ArgumentTypeError(f"expected {expected() if callable(expected) else expected}, "
                                             f"got {text!r}")
        return value
    parse.__name__ = "value"  # argparse names the type in its messages
    return parse


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
