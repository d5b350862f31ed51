"""The `eqdsl` command (`python -m eqdsl`): stop signals are answered from its first line.

Until `eqdsl.cli` is imported (rich, YAML, the registries: a few hundred milliseconds), Ctrl-C
would end the interpreter with a KeyboardInterrupt traceback, SIGHUP and SIGTERM without a word.
Nothing exists yet that needs cleaning up, so a stop signal then exits 130 at once, quietly but
for one line; `eqdsl.cli.main` installs its own handlers before it creates anything.
"""
from __future__ import annotations

import os
import signal
import sys

from eqdsl.worker import STOP_SIGNALS  # the standard library only: imported at once


def _stopped_while_starting(signum, frame) -> None:
    os.write(2, b"interrupted: stopped, nothing written\n")
    os._exit(130)


def main() -> None:
    for s in STOP_SIGNALS:
        signal.signal(s, _stopped_while_starting)
    from eqdsl.cli import main as run_command

    sys.exit(run_command())


if __name__ == "__main__":
    main()
