"""`guarded(step, budget)`: a step under a memory and time budget, undone by a snapshot process
where it passes it (see `eqdsl.worker`)."""
from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Generic, TypeVar

from eqdsl.worker import role

T = TypeVar("T")


class StopCause(Enum):
    MEMORY = "memory limit"
    TIME = "time limit"
    KILLED = "killed"  # died from outside during the step (most likely the kernel's OOM killer)


@dataclass(frozen=True)
class Budget:
    """What one guarded step may use: bytes of memory (whole e-graph process) and a deadline
    (`time.monotonic()` value); None for no bound."""

    memory_bytes: int | None = None
    deadline: float | None = None


@dataclass(frozen=True)
class Done(Generic[T]):
    value: T


@dataclass(frozen=True)
class Stopped:
    cause: StopCause
    peak_bytes: int  # the memory measured when the step was stopped


def default_memory_bytes() -> int:
    """Half of the memory this process may use (the machine's, or its cgroup's if smaller)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = open("/sys/fs/cgroup/memory.max").read().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    except OSError:
        pass
    return total // 2


def guarding() -> bool:
    return role.in_worker and hasattr(os, "fork")


def guarded(step: Callable[[], T], budget: Budget) -> Done[T] | Stopped:
    """Run `step` under `budget` (see the module docstring). Without a supervisor: just run it."""
    if not guarding() or (budget.memory_bytes is None and budget.deadline is None):
        return Done(step())
    parent = os.getpid()
    release_r, release_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    resumes = [quiet() for quiet in role.BEFORE_FORK]
    child = os.fork()
    if child == 0:
        os.close(release_w)
        return _snapshot(parent, release_r, budget)
    for resume in resumes:
        resume()
    os.close(release_r)
    try:
        value = step()
    finally:
        os.write(release_w, RELEASE)  # the step is over (also if it raised): the snapshot goes
        os.close(release_w)
        os.waitpid(child, 0)
    return Done(value)


def _snapshot(worker: int, release_fd: int, budget: Budget) -> Stopped:
    """The snapshot's side of `guarded`: exit when released, take over when the worker must stop
    (or died: end of file on the pipe without the release byte)."""
    while True:
        state = _release_state(release_fd)
        if state == "released":
            os._exit(0)
        if state == "died":
            os.close(release_fd)
            return Stopped(StopCause.KILLED, 0)
        used = 0 if budget.memory_bytes is None else _rss(worker) + _private_bytes(os.getpid())
        cause = None
        if budget.memory_bytes is not None and used > budget.memory_bytes:
            cause = StopCause.MEMORY
        elif budget.deadline is not None and time.monotonic() > budget.deadline:
            cause = StopCause.TIME
        if cause is not None:
            # The worker cannot be past `guarded` (it waits for this process to exit), so once
            # killed this process goes on, even if the step had just finished: it is undone.
            _kill(worker)
            os.close(release_fd)
            return Stopped(cause, used)
        time.sleep(role.POLL_S)


RELEASE = b"r"


def _release_state(fd: int) -> str:
    """'running' (nothing to read yet), 'released' (the worker finished its step) or 'died'."""
    import select

    if not select.select([fd], [], [], 0)[0]:
        return "running"
    return "released" if os.read(fd, 1) == RELEASE else "died"


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _private_bytes(pid: int) -> int:
    """Pages only this process holds: after a fork, the originals of pages the other one wrote."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return sum(int(line.split()[1]) * 1024 for line in f if line.startswith("Private_"))
    except (OSError, ValueError, IndexError):
        return 0

