"""What the commands share: the `Work` a command hands the worker, the consoles, flag parsers and
help texts, and `writing` (a command that writes one file through a scratch)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

from eqdsl.diagnostics import EqdslError
from eqdsl.output import FileScratch

stderr = Console(stderr=True, highlight=False, soft_wrap=True)
stdout = Console(highlight=False, soft_wrap=True)


@dataclass(frozen=True)
class Work:
    """A command's long part, run in the worker; `cleanup` runs in the supervisor afterwards."""

    run: Callable[[], int]
    cleanup: Callable[[], str | None] = lambda: None  # a line to say instead of "nothing written", if any
    # seconds after which the worker is stopped as a stop signal would, for a limit `run` can check
    # only between steps of code it does not own (a user's reference semantics that never returns)
    hard_limit_s: float | None = None


def with_target(lang, target: str | None):
    """The language with the target params its rules read bound (`eqdsl.ir.params`); without
    `--target`, such rules are an error naming them."""
    from eqdsl.cost.targets import bind_target, load_target
    from eqdsl.ir.params import bind_params, params_in_rules

    reading = params_in_rules(lang)
    if target is None:
        if reading:
            rule, names = next(iter(reading.items()))
            raise EqdslError.one(f"rule '{rule}' reads target param(s) {', '.join(sorted(names))}: "
                                 "expected --target NAME (a shipped target or a .yaml file)")
        return lang
    return bind_params(lang, bind_target(lang, load_target(target, Path.cwd())))


def writing(args: argparse.Namespace, key: str, flag: str, work: Callable[[FileScratch | None], int]) -> Work:
    """A command that writes the file `args.<key>` (if given): refused before any work if it
    exists (without --force); written beside it first, renamed into place at the end."""
    path = getattr(args, key)
    scratch = None if path is None else FileScratch(Path(path), args.force, flag)
    return Work(lambda: work(scratch), scratch.discard if scratch is not None else lambda: None)


def published(written: Path, wanted: str | Path) -> str:
    """Where an output file went; a warning on stderr when a file that appeared at `wanted`
    during the work sent it to a free name beside it (`FileScratch.publish`)."""
    if Path(written).name != Path(wanted).name:
        stderr.print(f"warning: {wanted} appeared while eqdsl ran; it was left alone and the result "
                     f"was written to {written}", markup=False)
    return str(written)


def int_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None


def named_ints(text: str) -> tuple[str, tuple[int, ...]]:
    name, _, values = text.partition("=")
    if not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=INT,INT,... got {text!r}")
    return name, tuple(int_list(values))


def param_flag(text: str) -> tuple[str, int]:
    key, _, value = text.partition("=")
    if not value.isdigit():
        raise EqdslError.one(f"--param: expected NAME=INT, got {text!r}")
    return key, int(value)


def shape_flag(text: str) -> tuple[str, tuple[int, ...]]:
    name, _, dims = text.partition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not name or not shape or any(d <= 0 for d in shape):
        raise argparse.ArgumentTypeError(f"expected INPUT=D1,D2,... with dimensions > 0, got {text!r}")
    return name, shape


def setting_flag(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` of `--set`: the value read as YAML (`5`, `true`, `[greedy]`, `{method: cpsat}`)."""
    from eqdsl.fields import load_yaml

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. schedule.iter_limit=5), got {text!r}")
    try:
        return key.strip(), load_yaml(value, "--set")
    except EqdslError as err:
        raise argparse.ArgumentTypeError(f"{text!r}: {err.diagnostics[0].message}") from None


def constant_flag(text: str) -> tuple[str, float | int]:
    name, _, value = text.partition("=")
    try:
        number = float(value) if any(c in value for c in ".eE") else int(value)
    except ValueError:
        number = None
    if not name or number is None:
        raise argparse.ArgumentTypeError(f"expected INPUT=NUMBER, got {text!r}")
    return name, number


def weights_from(path: Path, lang):
    """The weights of a program imported from `path` (its initializers and what import derives)."""
    from eqdsl.onnx.read import read_onnx

    return read_onnx(path, lang).weights


def in_worker(cmd: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], Work]:
    return lambda args: Work(lambda: cmd(args))


def number_flag(kind: type, low: float, expected: str) -> Callable[[str], float]:
    """An argparse type: a finite number ≥ low (argparse reports the flag and the value)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not (value >= low) or value in (float("inf"),):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value
    return parse


AT_LEAST_ONE = number_flag(int, 1, "an integer ≥ 1")


AT_LEAST_ZERO = number_flag(int, 0, "an integer ≥ 0")


POSITIVE = number_flag(float, 1e-9, "a number > 0")


NO_REF_HELP = ("never run the ruleset's <name>_ref.py (reference semantics are Python: running an "
               "untrusted ruleset's runs its code); a language that needs one is then an error")


FORCE_HELP = ("write the results into a folder beside files eqdsl did not write: they are kept, never "
              "deleted or overwritten (one named like a result, e.g. report.json, is refused)")


TARGET_HELP = "values for the target params the rules read (a shipped name or a .yaml)"

