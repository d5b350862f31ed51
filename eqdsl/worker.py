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

import fcntl
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Generic, Iterable, Iterator, TypeVar

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


# Each stops a thread of this process before a fork (`status.suspend`: the status line's redraw
# thread) and returns the call that starts it again: eqdsl forks only single-threaded processes
# (native pools excepted that stop themselves at a fork: OpenBLAS's). Set by the CLI.
BEFORE_FORK: list[Callable[[], Callable[[], None]]] = []


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
    resumes = [quiet() for quiet in BEFORE_FORK]
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


# ---- lineages: disposable processes whose work may be guarded ---------------------------------

@dataclass(frozen=True)
class Lineage:
    """A forked process running one piece of work (a sweep task) with guarding on: its
    snapshots may take over from it, and whichever process finishes writes the result to `fd`'s
    pipe. End of file on `fd` means the lineage is over."""

    pid: int
    fd: int


def start_lineage(work: Callable[[], bytes]) -> Lineage:
    """Fork a lineage for `work()` (its bytes are the result; an exception is printed on stderr
    and gives no result). It stays in the caller's process group, so the supervisor's kill of
    that group takes it too."""
    global _in_worker, _status_fd
    result_r, result_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid != 0:
        os.close(result_w)
        return Lineage(pid, result_r)
    os.close(result_r)
    if _status_fd is not None:  # only the command's worker reports the command's exit code
        os.close(_status_fd)
        _status_fd = None
    _in_worker = True
    data = b""
    try:
        data = work()
    except BaseException:  # noqa: BLE001 - reported by the caller as a task without a result
        traceback.print_exc()
    finally:
        _flush_quietly()
        _write_all(result_w, data)
        os._exit(0)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def wait_lineages(running: dict[int, bytearray]) -> list[tuple[int, bytes | None]]:
    """Block until at least one lineage (by its `fd`, with the bytes read so far) ends; returns
    (fd, result or None when it died without one) for each that ended, and closes its fd."""
    import select

    ended: list[tuple[int, bytes | None]] = []
    while not ended:
        ready, _, _ = select.select(list(running), [], [])
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                running[fd] += chunk
                continue
            os.close(fd)
            data = bytes(running.pop(fd))
            ended.append((fd, data or None))
    return ended


def reap_quietly(pid: int) -> int | None:
    """The exit status of a child that has ended (None if it was already reaped)."""
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None


# ---- scratch of dead runs ----------------------------------------------------------------------

LOCK_NAME = ".eqdsl-lock"


def hold_lock(folder: Path) -> int:
    """Lock `folder` as in use (an flock on a file inside) until the returned descriptor is
    closed in this process and in every process forked meanwhile (the worker, the janitor):
    once the whole run is gone, even by SIGKILL, the kernel drops the lock."""
    fd = os.open(folder / LOCK_NAME, os.O_WRONLY | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def is_abandoned(folder: Path) -> bool:
    """`folder` holds eqdsl's lock file and no live process holds the lock."""
    try:
        fd = os.open(folder / LOCK_NAME, os.O_WRONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops the lock just taken
    return True


def sweep_abandoned(folders: Iterable[Path]) -> None:
    """Remove each folder a dead eqdsl run left (its lock file unheld): scratch the kill of a
    whole process group, janitor included, could not clean."""
    for folder in folders:
        if folder.is_dir() and not folder.is_symlink() and is_abandoned(folder):
            shutil.rmtree(folder, ignore_errors=True)


# ---- the supervisor ----------------------------------------------------------------------------

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_lifeline_fd: int | None = None  # the worker lineage's read end: end of file once the supervisor is gone


def supervisor_gone() -> bool:
    """True in a worker whose supervisor has died (killed, even with SIGKILL): the user wants
    nothing more from this run, so nothing may be published."""
    import select

    return _lifeline_fd is not None and bool(select.select([_lifeline_fd], [], [], 0)[0])


def supervise(work: Callable[[], int], cleanup: Callable[[], str | None] = lambda: None,
              in_process: bool = False) -> int:
    """Run `work()` (returning an exit code) in a worker process; see the module docstring.

    Exit codes: work's own, 130 when stopped by SIGINT, SIGTERM, SIGHUP or SIGQUIT, 1 when the
    worker died without reporting (a crash of native code). `cleanup` runs once the worker is
    gone, however it ended (in-process: after `work`): in the supervisor, or, if the supervisor
    itself was killed (SIGKILL), in its janitor, which kills the worker's process group first.
    After a stop signal, a line `cleanup` returns is said instead of "nothing written" (a command
    that keeps what its worker finished, as `eqdsl synthesize` keeps the rules verified so far).
    The worker's temporary files go to a private folder that is removed the same way.
    """
    if in_process or not hasattr(os, "fork"):
        try:
            return work()
        finally:
            cleanup()
    sweep_abandoned(Path(tempfile.gettempdir()).glob("eqdsl-*"))
    private_tmp = tempfile.mkdtemp(prefix="eqdsl-")
    lock = hold_lock(Path(private_tmp))

    def clean_all() -> str | None:
        said = cleanup()
        shutil.rmtree(private_tmp, ignore_errors=True)  # eqdsl's own temporary folder
        os.close(lock)
        return said

    sys.stdout.flush()
    sys.stderr.flush()
    # no stop signal between the forks and `_wait`'s handlers: each process unblocks its own
    unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    janitor_fd, janitor = _start_janitor(clean_all, unblocked)
    lifeline_r, lifeline_w = os.pipe()
    status_r, status_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(janitor_fd)
        os.close(lifeline_w)
        os.close(status_r)
        _worker_main(work, status_w, lifeline_r, private_tmp, unblocked)
    _own_group(pid)  # here too: a stop signal right after the fork must find the group to kill
    os.close(status_w)
    os.close(lifeline_r)
    os.write(janitor_fd, f"{pid}\n".encode())
    try:
        return _wait(pid, status_r, clean_all, unblocked)
    finally:
        os.write(janitor_fd, JANITOR_DONE)  # cleaned up here: the janitor exits quietly
        os.close(janitor_fd)
        os.close(lifeline_w)
        reap_quietly(janitor)


JANITOR_DONE = b"done\n"


def _start_janitor(cleanup: Callable[[], object], unblocked: Iterable[int]) -> tuple[int, int]:
    """A process that outlives a killed supervisor: it reads the worker's pid, then waits for
    end of file on its pipe. Without the supervisor's `done` first, the supervisor died: kill the
    worker's group, clean up. Stop signals are ignored: it ends when the supervisor does."""
    control_r, control_w = os.pipe()
    janitor = os.fork()
    if janitor != 0:
        os.close(control_r)
        return control_w, janitor
    os.close(control_w)
    _own_group(0)  # out of eqdsl's group: `kill -9 -PGID` of the command must not take the janitor too
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
    data = b""
    while chunk := os.read(control_r, 64):
        data += chunk
    if not data.endswith(JANITOR_DONE):
        if data.split():
            _kill_group(int(data.split()[0]))
        cleanup()
    os._exit(0)


def _worker_main(work: Callable[[], int], status_w: int, lifeline_r: int, private_tmp: str,
                 unblocked: Iterable[int]) -> None:
    global _in_worker, _status_fd, _lifeline_fd
    _own_group(0)  # its own group: the supervisor kills every process of the lineage at once
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN if s == signal.SIGINT else signal.SIG_DFL)  # the supervisor decides
    signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
    _in_worker, _status_fd, _lifeline_fd = True, status_w, lifeline_r
    tempfile.tempdir = os.environ["TMPDIR"] = private_tmp
    code = 1
    try:
        code = work()
    except SystemExit as stop:  # raised where the supervisor was found gone
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:  # noqa: BLE001 - an internal error: report it, never hang the supervisor
        traceback.print_exc()
    finally:
        _flush_quietly()
        try:
            os.write(status_w, f"{code}\n".encode())
        except OSError:  # the supervisor is gone (killed): nobody is left to tell
            pass
        os._exit(code)


def _flush_quietly() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed terminal or pipe: nothing left to say
            pass


class Interrupted(Exception):
    """A stop signal reached the supervisor (`stop_signals_interrupt`)."""


STOP_GRACE_S = 5.0  # from a stop signal to exit 130, whatever the interrupted code was doing


def _raise_interrupted(signum, frame) -> None:
    _arm_stop_watchdog()
    raise Interrupted


def _arm_stop_watchdog() -> None:
    """Exit 130 in `grace_s` seconds unless the process has ended: the exception a stop signal
    raises lands in whatever code ran (a library's import, a thread pool's start) and may leave
    it holding a lock or a non-daemon thread that the interpreter's exit would wait for."""
    import threading

    grace_s = STOP_GRACE_S

    def stop() -> None:
        time.sleep(grace_s)
        _say(f"interrupted: the clean-up did not end within {grace_s:g} s; stopped")
        os._exit(INTERRUPTED)

    threading.Thread(target=stop, name="eqdsl-stop-watchdog", daemon=True).start()


@contextmanager
def stop_signals(handler: Callable[[int, Any], None] | signal.Handlers) -> Iterator[None]:
    """Inside: SIGINT, SIGTERM, SIGHUP and SIGQUIT go to `handler`, but for those ignored (the
    command was started with them ignored: `nohup`, a script's background job); the old handlers after."""
    old = {s: signal.signal(s, handler) for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for s, previous in old.items():
            signal.signal(s, previous)


def stop_signals_interrupt():
    """Inside: stop signals raise `Interrupted` (the command line's preparation, before
    `supervise` has a worker to kill, ends cleanly too)."""
    return stop_signals(_raise_interrupted)


def _wait(pid: int, status_r: int, cleanup: Callable[[], str | None], unblocked: Iterable[int]) -> int:
    code: int | None = None
    interrupted = False
    try:
        with stop_signals(_raise_interrupted):
            signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)  # a signal sent meanwhile lands here
            data = b""
            while chunk := os.read(status_r, 64):
                data += chunk
        code = int(data.split()[0]) if data.split() else None
    except Interrupted:
        _kill_group(pid)
        interrupted = True
    finally:
        with stop_signals(signal.SIG_IGN):  # a second Ctrl-C must not cut the clean-up short
            os.close(status_r)
            reap_quietly(pid)
            kept = cleanup()
    if interrupted:
        _say(kept or "interrupted: stopped, nothing written")
        return INTERRUPTED
    if code is None:
        _say("error: the eqdsl worker process died without a result (killed from outside, or a "
             "crash in native code)")
        return 1
    return code


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:  # the terminal is gone (SIGHUP): the exit code says it
        pass


def _own_group(pid: int) -> None:
    """Put the child `pid` in a process group of its own (both parent and child call it, so
    the group exists whichever runs first)."""
    try:
        os.setpgid(pid, pid)
    except OSError:  # the child already did it, or has ended
        pass


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
