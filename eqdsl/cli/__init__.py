"""The `eqdsl` command: check, compile, run, execute, measure, sweep, report, doctor, verify, extract,
import, export.

Exit codes: 0 success, 2 a user mistake (rendered diagnostics, no traceback), 1 a failed check
(verify, validation) or an internal error, 130 interrupted (SIGINT / SIGTERM).

Every command's work runs in a worker process (`eqdsl.worker.supervise`): Ctrl-C stops any stage
within a poll interval, and what was half-written is removed. A command function either finishes
quickly in the supervisor (returns an exit code) or returns the `Work` to run in the worker.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Callable, cast

from eqdsl import status
from eqdsl.cli.common import Work
from eqdsl.cli.files import _file_commands
from eqdsl.cli.language import _language_commands
from eqdsl.cli.optimize import add_optimize_command
from eqdsl.cli.running import _run_commands
from eqdsl.cli.synthesis import _synthesis_commands
from eqdsl.diagnostics import EqdslError
from eqdsl.output import remove_prepared


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="eqdsl", description="Equality saturation for tensor programs.")
    p.add_argument("--version", action="version", version=f"eqdsl {_version()}")
    sub = p.add_subparsers(dest="command", required=True)
    _language_commands(sub)
    _synthesis_commands(sub)
    _run_commands(sub)
    add_optimize_command(sub)
    _file_commands(sub)
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("eqdsl")
    except PackageNotFoundError:  # run from a source tree without installing
        return "(not installed)"


def main(argv: list[str] | None = None) -> int:
    from eqdsl import worker
    from eqdsl.worker import Interrupted, stop_signals, stop_signals_interrupt, supervise

    if status.suspend not in worker.BEFORE_FORK:
        worker.BEFORE_FORK.append(status.suspend)
    in_process = os.environ.get("EQDSL_IN_PROCESS") == "1"  # for debuggers and profilers
    outcome: int | Work | None = None
    try:
        with stop_signals_interrupt():
            args = build_parser().parse_args(argv)
            outcome = _reporting(lambda: args.fn(args))
            if isinstance(outcome, int):
                return outcome
            work = outcome
            return supervise(lambda: cast(int, _reporting(work.run)), work.cleanup, in_process, work.hard_limit_s)
    except Interrupted:  # before the worker started: what the command prepared is removed
        with stop_signals(signal.SIG_IGN):  # a second Ctrl-C must not cut the clean-up short
            if isinstance(outcome, Work):
                outcome.cleanup()
            remove_prepared()  # a scratch folder made before the command handed it over
            print(("\r\033[K" if sys.stderr.isatty() else "") + "interrupted: stopped, nothing written",
                  file=sys.stderr)  # on a terminal, over the status line
        return 130


def _reporting(fn: Callable[[], int | Work]) -> int | Work:
    """`fn()`, with user mistakes rendered on stderr (exit 2) instead of raised."""
    try:
        return fn()
    except EqdslError as err:
        for d in err.diagnostics:
            print(d.render(), file=sys.stderr)  # plain print: rich would re-wrap source lines
        return 2
    except KeyboardInterrupt:  # only reachable in-process (the worker ignores SIGINT)
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as err:  # the machine's, not eqdsl's: a full disk, a busy mount, no permission
        where = f": {err.filename}" if err.filename else ""
        print(f"error: {err.strerror or err}{where} (errno {err.errno}); nothing was published", file=sys.stderr)
        return 1

