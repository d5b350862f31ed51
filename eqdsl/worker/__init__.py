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
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from eqdsl.worker import role
from eqdsl.worker.guard import Budget, Done, StopCause, Stopped, default_memory_bytes, guarded, guarding
from eqdsl.worker.lineage import Lineage, reap_quietly, start_lineage, wait_lineages
from eqdsl.worker.locks import hold_lock, is_abandoned, sweep_abandoned
from eqdsl.worker.reports import StatusReader, say_published, say_publishing

__all__ = [
    "BEFORE_FORK", "INTERRUPTED", "STOP_GRACE_S", "STOP_SIGNALS", "Budget", "Deadline", "Done", "Interrupted",
    "Lineage", "StopCause", "Stopped", "TimeUp", "alarm", "default_memory_bytes", "deferred_stops", "guarded",
    "guarding", "hold_lock", "is_abandoned", "reap_quietly", "say_published", "say_publishing", "start_lineage",
    "stop_signals", "stop_signals_interrupt", "supervise", "supervisor_gone", "sweep_abandoned", "wait_lineages",
]

BEFORE_FORK = role.BEFORE_FORK


INTERRUPTED = 130


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def supervisor_gone() -> bool:
    """True in a worker whose supervisor has died (killed, even with SIGKILL): the user wants
    nothing more from this run, so nothing may be published."""
    import select

    return role.lifeline_fd is not None and bool(select.select([role.lifeline_fd], [], [], 0)[0])


def supervise(work: Callable[[], int], cleanup: Callable[[], str | None] = lambda: None,
              in_process: bool = False, hard_limit_s: float | None = None) -> int:
    """Run `work()` (returning an exit code) in a worker process; see the module docstring.

    Exit codes: work's own, 130 when stopped by SIGINT, SIGTERM, SIGHUP or SIGQUIT, 1 when the
    worker died without reporting (a crash of native code). `cleanup` runs once the worker is
    gone, however it ended (in-process: after `work`): in the supervisor, or, if the supervisor
    itself was killed (SIGKILL), in its janitor, which kills the worker's process group first.
    After a stop signal, a line `cleanup` returns is said instead of "nothing written" (a command
    that keeps what its worker finished, as `eqdsl synthesize` keeps the rules verified so far).
    `hard_limit_s`: a worker still running that long after its start is stopped the same way, and
    the exit code is 1 (`OVERDUE`): for limits the work checks only between steps.
    The worker's temporary files go to a private folder that is removed the same way.
    """
    if in_process or not hasattr(os, "fork"):
        try:
            return work()
        finally:
            cleanup()
    scratch = _Scratch(cleanup)
    unblocked, janitor_fd, janitor = _prepare(scratch)
    pid, status_r, lifeline_w = _fork_worker(work, scratch, unblocked, janitor_fd)
    try:
        return _wait(pid, status_r, scratch.clean_all, unblocked, hard_limit_s)
    finally:
        os.write(janitor_fd, JANITOR_DONE)  # cleaned up here: the janitor exits quietly
        os.close(janitor_fd)
        os.close(lifeline_w)
        reap_quietly(janitor)


@dataclass
class _Scratch:
    """The worker's private temporary folder and its lock, once made; `clean_all` removes them
    after the caller's own clean-up (in the supervisor, or in the janitor)."""
    cleanup: Callable[[], str | None]
    folder: str = ""
    lock: int | None = None

    def clean_all(self) -> str | None:
        said = self.cleanup()
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
        if self.lock is not None:
            os.close(self.lock)
        return said


def _prepare(scratch: _Scratch) -> tuple[Iterable[int], int, int]:
    """Make the private folder, hold its lock and start the janitor. Returns with the stop signals
    blocked (no stop between the forks and `_wait`'s handlers: each process unblocks its own):
    the mask to restore, the janitor's pipe and pid."""
    try:  # a stop before the janitor can clean for us (a BLAS thread takes the signal): clean here
        with deferred_stops():  # its first call creates and removes a probe file in $TMPDIR
            temporary = Path(tempfile.gettempdir())
        sweep_abandoned(temporary.glob("eqdsl-*"))
        with deferred_stops():  # the folder made and its name kept, or neither
            scratch.folder = tempfile.mkdtemp(prefix="eqdsl-", dir=temporary)
        scratch.lock = hold_lock(Path(scratch.folder))
        sys.stdout.flush()
        sys.stderr.flush()
        unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        janitor_fd, janitor = _start_janitor(scratch.clean_all, unblocked)
    except BaseException:
        if scratch.folder:
            shutil.rmtree(scratch.folder, ignore_errors=True)
        raise
    return unblocked, janitor_fd, janitor


def _fork_worker(work: Callable[[], int], scratch: _Scratch, unblocked: Iterable[int],
                 janitor_fd: int) -> tuple[int, int, int]:
    """The worker forked, in its own group, and named to the janitor: its pid, the pipe its exit
    code comes through, and the lifeline whose closing tells it the supervisor is gone."""
    lifeline_r, lifeline_w = os.pipe()
    status_r, status_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(janitor_fd)
        os.close(lifeline_w)
        os.close(status_r)
        _worker_main(work, status_w, lifeline_r, scratch.folder, unblocked)
    _own_group(pid)  # here too: a stop signal right after the fork must find the group to kill
    os.close(status_w)
    os.close(lifeline_r)
    os.write(janitor_fd, f"{pid}\n".encode())
    return pid, status_r, lifeline_w


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
    _own_group(0)  # its own group: the supervisor kills every process of the lineage at once
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN if s == signal.SIGINT else signal.SIG_DFL)  # the supervisor decides
    signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
    role.in_worker, role.status_fd, role.lifeline_fd = True, status_w, lifeline_r
    tempfile.tempdir = os.environ["TMPDIR"] = private_tmp
    code = 1
    try:
        code = work()
    except SystemExit as stop:  # raised where the supervisor was found gone
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:  # noqa: BLE001 - an internal error: report it, never hang the supervisor
        traceback.print_exc()
    finally:
        role.flush_quietly()
        try:
            os.write(status_w, f"{code}\n".encode())
        except OSError:  # the supervisor is gone (killed): nobody is left to tell
            pass
        os._exit(code)


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


@contextmanager
def deferred_stops() -> Iterator[None]:
    """Inside: a stop signal is held and delivered again, to the handlers of before, as the block
    ends: for a step that must not be cut in two (a file made and its name kept). Blocking the
    signal would not do: a BLAS thread takes it and Python runs the handler in the main thread."""
    held: list[int] = []
    try:
        with stop_signals(lambda signum, frame: held.append(signum)):
            yield
    finally:
        if held:
            signal.raise_signal(held[0])


def stop_signals_interrupt():
    """Inside: stop signals raise `Interrupted` (the command line's preparation, before
    `supervise` has a worker to kill, ends cleanly too)."""
    return stop_signals(_raise_interrupted)


class Overdue(Interrupted):
    """The worker ran past its `hard_limit_s`."""


OVERDUE = 1


def _wait(pid: int, status_r: int, cleanup: Callable[[], str | None], unblocked: Iterable[int],
          hard_limit_s: float | None = None) -> int:
    status = StatusReader(status_r)
    interrupted: Interrupted | None = None
    finished = True
    try:
        with stop_signals(_raise_interrupted), alarm(hard_limit_s):
            signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)  # a signal sent meanwhile lands here
            status.read_to_end()
    except Interrupted as stop:
        with stop_signals(signal.SIG_IGN):
            status.drain()
            finished = status.publish_finished(PUBLISH_WAIT_S)
        _kill_group(pid)
        interrupted = stop
    finally:
        with stop_signals(signal.SIG_IGN):  # a second Ctrl-C must not cut the clean-up short
            os.close(status_r)
            reap_quietly(pid)
            kept = cleanup()
    if isinstance(interrupted, Overdue):
        _say(f"stopped: still running {hard_limit_s:g} s after the start, past the time limit (a step that never "
             f"returns, such as a reference semantics function that loops); "
             + (kept or _stopped_line(status.published, finished)).removeprefix("interrupted: "))
        return OVERDUE
    if interrupted is not None:
        _say(kept or _stopped_line(status.published, finished))
        return INTERRUPTED
    if status.code is None:
        _say("error: the eqdsl worker process died without a result (killed from outside, or a "
             "crash in native code)")
        return 1
    return status.code


NEVER_S = 1e9  # 31 years: a longer limit is none (the timer's time_t cannot hold 1e11 s)


class TimeUp(BaseException):
    """An `alarm` inside the worker's own work ran out. Not an `Exception`: a library that catches
    every exception of the code it runs (Hypothesis replays a failing example) must let it pass."""


@dataclass
class Deadline:
    """What an `alarm` knows: whether its time ran out (a caller whose code may have swallowed the
    exception asks this, not only whether one reached it)."""
    expired: bool = False


@contextmanager
def alarm(seconds: float | None, raised: type[BaseException] = Overdue, again_s: float = 0.0,
          spared: tuple[str, ...] = ()) -> Iterator[Deadline]:
    """Inside: `raised` is raised `seconds` from now (None, or past `NEVER_S`: never), and every
    `again_s` after that while still inside (0: once), for code that catches one and carries on;
    never inside a module whose name starts with one of `spared` (a library whose garbage-collector
    hook would print the exception and drop it): the next time comes `again_s` later. Python runs
    signal handlers in the main thread only: elsewhere there is no limit."""
    deadline = Deadline()
    if seconds is None or seconds > NEVER_S or threading.current_thread() is not threading.main_thread():
        yield deadline
        return

    def overdue(signum, frame) -> None:
        deadline.expired = True
        if not (spared and frame is not None and str(frame.f_globals.get("__name__", "")).startswith(spared)):
            raise raised

    old = signal.signal(signal.SIGALRM, overdue)
    signal.setitimer(signal.ITIMER_REAL, seconds, again_s)
    try:
        yield deadline
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


PUBLISH_WAIT_S = 2.0  # a stop waits this long for a publish under way (renames) to end


def _stopped_line(published: str | None, finished: bool) -> str:
    if published is not None:
        return f"interrupted: stopped after the results were published to {published}"
    if not finished:
        return "interrupted: stopped while the results were being put in place; check the output"
    return "interrupted: stopped, nothing written"


def _say(line: str) -> None:
    """`line` on stderr; on a terminal, over the status line a stopped worker left drawn."""
    try:
        print(("\r\033[K" if sys.stderr.isatty() else "") + line, file=sys.stderr, flush=True)
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

