"""What a worker tells its supervisor through the status pipe, one line each: `publishing` as it
starts to put results in place, `published PATH` once they are there, and last its exit code.

Why: a stop that lands while the worker renames its results into place must neither cut the
publish in two nor claim "nothing written" over a file that is already there. So a stop before
`publishing` kills the worker (nothing of it is in place); a stop after it waits for `published`
(a few renames; at most `wait_s`), then kills the rest and names what was published.
"""
from __future__ import annotations

import json
import os
import select
import time
from pathlib import Path

from eqdsl.worker import role

PUBLISHING = "publishing"
PUBLISHED = "published"


def say_publishing() -> None:
    _say(PUBLISHING)


def say_published(path: Path) -> None:
    _say(f"{PUBLISHED} {json.dumps(str(path))}")


def _say(line: str) -> None:
    if role.status_fd is not None:  # in a worker (a library caller has no supervisor to tell)
        try:
            os.write(role.status_fd, f"{line}\n".encode())
        except OSError:  # the supervisor is gone: `stop_if_abandoned` stops the publish
            pass


class StatusReader:
    """The supervisor's end of the pipe: every line the worker lineage wrote, read as it comes."""

    def __init__(self, fd: int) -> None:
        self.fd, self.data, self.ended = fd, b"", False

    def read_to_end(self) -> None:
        while chunk := os.read(self.fd, 4096):
            self.data += chunk
        self.ended = True

    def _lines(self) -> list[str]:
        return self.data.decode(errors="replace").splitlines()

    @property
    def code(self) -> int | None:
        """The exit code, the last line (None: the lineage died without one)."""
        lines = self._lines()
        return int(lines[-1]) if self.ended and lines and lines[-1].lstrip("-").isdigit() else None

    @property
    def published(self) -> str | None:
        found = [line.split(" ", 1)[1] for line in self._lines() if line.startswith(PUBLISHED + " ")]
        return json.loads(found[-1]) if found else None

    def publish_finished(self, wait_s: float) -> bool:
        """After a stop: True once nothing is half-published (no `publishing`, or its `published`
        arrived within `wait_s`); False if the publish is still under way."""
        deadline = time.monotonic() + wait_s
        while PUBLISHING in self._lines() and self.published is None and not self.ended:
            if not self._read_within(deadline - time.monotonic()):
                return False
        return True

    def drain(self) -> None:
        """Take what is in the pipe now without waiting (a stop interrupted `read_to_end`)."""
        while not self.ended and self._read_within(0):
            pass

    def _read_within(self, seconds: float) -> bool:
        """One read, if the pipe has data (or its end) within `seconds`; whether it had."""
        if seconds < 0 or not select.select([self.fd], [], [], seconds)[0]:
            return False
        chunk = os.read(self.fd, 4096)
        self.data += chunk
        self.ended = not chunk
        return True
