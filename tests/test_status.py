"""The live status line: drawn on a terminal only, with the stage's elapsed time and facts."""
from __future__ import annotations

import io
import threading
import time

from rich.console import Console

from eqdsl import status


def test_the_line_shows_the_stage_its_seconds_and_what_it_knows_and_a_bound_never_falls():
    out = io.StringIO()
    status.show(Console(file=out, force_terminal=True, width=200))
    try:
        with status.stage("extract:cpsat"):
            status.update(incumbent=10.0, bound=4.0, note="CP-SAT round 1")
            status.update(bound=2.0)  # a weaker bound than one already proven
            time.sleep(0.6)
            assert status.line().startswith("extract:cpsat 1 s") or status.line().startswith("extract:cpsat 0 s")
            assert "incumbent 10 · bound 4 · gap 60.00% · CP-SAT round 1" in status.line()
        assert status.line() == ""
    finally:
        status.show(None)
    assert "extract:cpsat" in out.getvalue()  # redrawn while the stage ran


def test_nothing_is_drawn_or_kept_without_a_terminal():
    out = io.StringIO()
    status.show(Console(file=out, force_terminal=False))
    assert not status.active()
    with status.stage("validate"):
        status.update(step=3)
        assert status.line() == "validate 0 s"
    assert out.getvalue() == ""


def test_a_stop_message_clears_the_status_line_on_a_terminal_only(monkeypatch):
    import io

    from eqdsl import worker

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, start in ((Terminal(), "\r\033[K"), (io.StringIO(), "interrupted")):
        monkeypatch.setattr("sys.stderr", stream)
        worker._say("interrupted: stopped, nothing written")
        assert stream.getvalue().startswith(start) and stream.getvalue().endswith("nothing written\n")


def test_a_stage_that_ends_leaves_no_redraw_thread_to_fork():
    """A guarded step forks right after a stage may have ended: the line's redraw thread must be
    gone by then (a fork copies a thread that may hold the console's lock; Python warns of it)."""
    status.show(Console(file=io.StringIO(), force_terminal=True, width=200))
    try:
        for _ in range(20):
            with status.stage("load"):
                pass
            assert not [t for t in threading.enumerate() if type(t).__name__ == "_RefreshThread" and t.is_alive()]
    finally:
        status.show(None)
