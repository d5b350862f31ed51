"""Lineages: forked processes whose work may be guarded (a sweep's tasks), each reporting its
result through a pipe."""
from __future__ import annotations

import os
import sys
import traceback
from dataclasses import dataclass
from typing import Callable

from eqdsl.worker import role


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
    result_r, result_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid != 0:
        os.close(result_w)
        return Lineage(pid, result_r)
    os.close(result_r)
    if role.status_fd is not None:  # only the command's worker reports the command's exit code
        os.close(role.status_fd)
        role.status_fd = None
    role.in_worker = True
    data = b""
    try:
        data = work()
    except BaseException:  # noqa: BLE001 - reported by the caller as a task without a result
        traceback.print_exc()
    finally:
        role.flush_quietly()
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

