"""One live status line for long stages: the stage, its elapsed seconds and what it knows so far
(CP-SAT's incumbent, bound and gap; the MCTS step and best cost).

Contract: the CLI installs a terminal console with `show(console)`; the pipeline brackets each
stage with `stage(name)`; code deep inside a stage calls `update(**facts)` (any of `incumbent`,
`bound`, `step`, `best`, `note`) from any thread. With no console installed (library callers, a
pipe, CI) every call is a no-op. The line is redrawn four times a second by rich's `Live`
(elapsed time moves even while native code runs), above it the run's own lines keep printing,
and it is gone when the stage ends. A forked process that carries on as the worker (a guarded
step's snapshot, `eqdsl.worker`) starts its own line at the next `stage`.
"""
from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.live import Live
from rich.text import Text

_lock = threading.Lock()
_console: Console | None = None
_live: Live | None = None
_live_pid = 0
_stage: str | None = None
_started = 0.0
_facts: dict[str, Any] = {}


def show(console: Console | None) -> None:
    """Draw the line on `console` (only where it is a terminal); None: stop drawing."""
    global _console
    _console = console if console is not None and console.is_terminal else None


@contextmanager
def stage(name: str) -> Iterator[None]:
    global _stage, _started
    outer = (_stage, _started, dict(_facts))
    with _lock:
        _stage, _started = name, time.monotonic()
        _facts.clear()
    _start_live()
    try:
        yield
    finally:
        with _lock:
            _stage, _started = outer[0], outer[1]
            _facts.clear()
            _facts.update(outer[2])
        if _stage is None:
            _stop_live()


def active() -> bool:
    """Whether a line is drawn (callers skip work that only feeds it)."""
    return _console is not None


def update(**facts: Any) -> None:
    """What the running stage knows now (shown from the next redraw on). A stage's `bound` only
    rises: a lower one (a solver's own, below a bound proven before it ran) is ignored."""
    if _console is None:
        return
    with _lock:
        if "bound" in facts and "bound" in _facts:
            facts["bound"] = max(facts["bound"], _facts["bound"])
        _facts.update(facts)


def line() -> str:
    """The status line as it would be drawn now ('' outside a stage)."""
    with _lock:
        if _stage is None:
            return ""
        parts = [f"{_stage} {time.monotonic() - _started:.0f} s"]
        facts = dict(_facts)
    if "step" in facts:
        parts.append(f"step {facts['step']}")
    if "incumbent" in facts:
        parts.append(f"incumbent {number(facts['incumbent'])}")
    if "bound" in facts:
        parts.append(f"bound {number(facts['bound'])}")
        if facts.get("incumbent"):
            parts.append(f"gap {max(0.0, 1 - facts['bound'] / facts['incumbent']):.2%}")
    if "best" in facts:
        parts.append(f"best cost {number(facts['best'])}")
    if "note" in facts:
        parts.append(str(facts["note"]))
    return " · ".join(parts)


def number(x: float) -> str:
    """A cost as people read one: whole numbers with thousands separators (93,630,015), small
    ones to 4 significant digits, astronomical ones in scientific notation; the same for every
    fact, so an incumbent and its bound line up."""
    if abs(x) >= 1e15:
        return f"{x:.4g}"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


class _Line:
    def __rich__(self) -> Text:
        return Text("⏳ " + line(), style="dim")


def suspend() -> Callable[[], None]:
    """Stop drawing now (the redraw thread ends: a fork must not copy a thread that may hold the
    console's lock); returns the call that draws again, in this process only."""
    pid = os.getpid()
    if _live is None or _live_pid != pid:
        return lambda: None
    _stop_live()

    def resume() -> None:
        if os.getpid() == pid and _stage is not None:
            _start_live()

    return resume


def _start_live() -> None:
    global _live, _live_pid
    if _console is None:
        return
    if _live is not None and _live_pid == os.getpid():
        return
    _live, _live_pid = Live(_Line(), console=_console, refresh_per_second=4, transient=True), os.getpid()
    _live.start()


def _stop_live() -> None:
    """Stop drawing and wait for the redraw thread to end (rich's `stop` only tells it to), so
    that no fork after it copies a thread that may hold the console's lock."""
    global _live
    if _live is not None and _live_pid == os.getpid():
        redraws = getattr(_live, "_refresh_thread", None)
        _live.stop()
        if redraws is not None:
            redraws.join()
            _await_thread_exit(redraws.native_id)
    _live = None


def _await_thread_exit(native_id: int | None, limit_s: float = 1.0) -> None:
    """`join` returns when the thread's Python state is gone, a moment before the kernel ends
    the thread; a fork in that moment still copies it (and Python warns). Wait for the kernel."""
    deadline = time.monotonic() + limit_s
    while native_id is not None and os.path.exists(f"/proc/self/task/{native_id}"):
        if time.monotonic() > deadline:
            return
        time.sleep(0.001)
