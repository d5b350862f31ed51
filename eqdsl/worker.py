"""Process isolation: every `eqdsl` command's work runs in a worker process, and each e-graph
iteration can run under a hard memory and time budget.

Why processes: one egglog iteration and one CP-SAT solve are native code that neither Python's
SIGINT handling nor a limit checked between iterations can stop (an iteration of an
associative-commutative sum grew to 9.8 GB and ignored Ctrl-C for 40 s). So:

- `supervise(work)` forks a worker in its own process group and waits. SIGINT / SIGTERM in the
  supervisor kill the whole group at once (SIGKILL), run the clean-up and return 130:
  nothing the worker half-wrote survives, and OR-Tools' own SIGINT handler never sees a signal.
  The worker sends its exit code through a pipe, so a worker lineage whose first process died
  (see below) still reports.
- `guarded(step, budget)` runs `step()` in the current process after forking a *snapshot*: the
  child sleeps holding a copy-on-write copy of the state before the step and watches the parent.
  If the parent's memory (its RSS plus the pages only the snapshot still holds) passes the budget,
  or the deadline passes, the snapshot kills it and carries on as the worker, with `step` undone:
  the caller sees `Stopped(reason)`. If the step finishes, the snapshot is told to exit.
  Guarding needs a disposable process: it is on only inside `supervise`'s worker (a library
  caller's own process is never killed; there `guarded` just runs the step).
"""
from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Generic, TypeVar

T = TypeVar("T")

INTERRUPTED = 130
POLL_S = 0.01

_in_worker = False  # set in supervise's worker: guarded() may fork and kill
_status_fd: int | None = None  # the worker lineage's write end of the exit-code pipe


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
    return _in_worker and hasattr(os, "fork")


def guarded(step: Callable[[], T], budget: Budget) -> Done[T] | Stopped:
    """Run `step` under `budget` (see the module docstring). Without a supervisor: just run it."""
    if not guarding() or (budget.memory_bytes is None and budget.deadline is None):
        return Done(step())
    parent = os.getpid()
    release_r, release_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        os.close(release_w)
        return _snapshot(parent, release_r, budget)
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
        time.sleep(POLL_S)


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


# ---- the supervisor ----------------------------------------------------------------------------

def supervise(work: Callable[[], int], cleanup: Callable[[], None] = lambda: None,
              in_process: bool = False) -> int:
    """Run `work()` (returning an exit code) in a worker process; see the module docstring.

    Exit codes: work's own, 130 when interrupted (SIGINT/SIGTERM), 1 when the worker died
    without reporting (a crash of native code). `cleanup` runs in the supervisor once the worker
    is gone, however it ended (in-process: after `work`).
    """
    if in_process or not hasattr(os, "fork"):
        try:
            return work()
        finally:
            cleanup()
    status_r, status_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _worker_main(work, status_r, status_w)
    os.close(status_w)
    return _wait(pid, status_r, cleanup)


def _worker_main(work: Callable[[], int], status_r: int, status_w: int) -> None:
    global _in_worker, _status_fd
    os.close(status_r)
    os.setpgid(0, 0)  # its own group: the supervisor kills every process of the lineage at once
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor alone decides
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _in_worker, _status_fd = True, status_w
    code = 1
    try:
        code = work()
    except BaseException:  # noqa: BLE001 - an internal error: report it, never hang the supervisor
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.write(status_w, f"{code}\n".encode())
        os._exit(code)


class _Interrupted(Exception):
    pass


def _wait(pid: int, status_r: int, cleanup: Callable[[], None]) -> int:
    def interrupt(signum, frame):
        raise _Interrupted

    old = {s: signal.signal(s, interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        data = b""
        while chunk := os.read(status_r, 64):
            data += chunk
        code = int(data.split()[0]) if data.split() else None
    except _Interrupted:
        _kill_group(pid)
        print("interrupted: stopped, nothing written", file=sys.stderr)
        return INTERRUPTED
    finally:
        for s in old:  # a second Ctrl-C must not cut the clean-up short
            signal.signal(s, signal.SIG_IGN)
        os.close(status_r)
        _reap(pid)
        cleanup()
        for s, handler in old.items():
            signal.signal(s, handler)
    if code is None:
        print("error: the eqdsl worker process died without a result (killed from outside, or a "
              "crash in native code)", file=sys.stderr)
        return 1
    return code


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
