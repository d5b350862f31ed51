"""The `eqdsl` command (`python -m eqdsl`): stop signals are answered from its first line.

Until `eqdsl.cli` is imported (rich, YAML, the registries: a few hundred milliseconds), Ctrl-C
would end the interpreter with a KeyboardInterrupt traceback, SIGHUP and SIGTERM without a word.
Nothing exists yet that needs cleaning up, so a stop signal then exits 130 at once, quietly but
for one line; `eqdsl.cli.main` installs its own handlers before it creates anything. The handlers
go in before any other import (`os`, `signal` and `sys` are loaded with the interpreter). The
installed `eqdsl` command (bin/eqdsl) does the same even before Python's `site` runs; with
`python -m eqdsl`, a signal during `site` (~30 ms with an editable install) is CPython's to answer.
"""
import os
import signal
import sys


def _stopped_while_starting(signum, frame) -> None:
    os.write(2, b"interrupted: stopped, nothing written\n")
    os._exit(130)


_STARTING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)  # = worker.STOP_SIGNALS
for _s in _STARTING_SIGNALS:
    if signal.getsignal(_s) is not signal.SIG_IGN:  # ignored at start (nohup, a script's `&`): kept so
        signal.signal(_s, _stopped_while_starting)


def main() -> None:
    for s in _STARTING_SIGNALS:  # again: an embedding program may have imported this module earlier
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, _stopped_while_starting)
    from eqdsl.cli import main as run_command

    sys.exit(run_command())


if __name__ == "__main__":
    main()
