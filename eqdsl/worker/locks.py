"""Folder locks that die with their run: a scratch folder is in use while its lock is held, and
abandoned (swept by the next run) once no live process holds it."""
from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import Iterable

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

