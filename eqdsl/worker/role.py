"""What this process is in eqdsl's process tree: a worker (guarding on) or not, the pipes it
holds to its supervisor, and what must stop before it forks."""
from __future__ import annotations

import sys
from typing import Callable

POLL_S = 0.01  # how often a waiting process looks again
in_worker = False  # set in supervise's worker: guarded() may fork and kill
status_fd: int | None = None  # the worker lineage's write end of the exit-code pipe
lifeline_fd: int | None = None  # the worker lineage's read end: end of file once the supervisor is gone

# Each stops a thread of this process before a fork (`status.suspend`: the status line's redraw
# thread) and returns the call that starts it again: eqdsl forks only single-threaded processes
# (native pools excepted that stop themselves at a fork: OpenBLAS's). Set by the CLI.
BEFORE_FORK: list[Callable[[], Callable[[], None]]] = []


def flush_quietly() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed terminal or pipe: nothing left to say
            pass

