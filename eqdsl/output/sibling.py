"""The hidden scratch folders beside an output (`Sibling`): marked as eqdsl's, locked while a run
lives, swept when its run is dead; free sibling names; the process's umask."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from eqdsl.worker import deferred_stops, hold_lock, is_abandoned, supervisor_gone, sweep_abandoned

MARKER = ".eqdsl-output"
_PREPARED: list[Sibling] = []  # made in this process and not removed: what a stop before the work removes


def remove_prepared() -> None:
    """Remove every scratch folder this process made and has not removed (a stop that came
    while a command prepared its output, before it handed the scratch to its clean-up)."""
    for sibling in list(_PREPARED):
        sibling.remove()


class Sibling:
    """A hidden folder beside `target`, marked as eqdsl's, made with any missing parents."""

    def __init__(self, target: Path) -> None:
        self.made_parents = _missing_parents(target.parent)
        target.parent.mkdir(parents=True, exist_ok=True)
        _sweep_dead_siblings(target)
        self._lock: int | None = None
        with deferred_stops():  # made, marked, locked and registered, or none of it
            self.path = Path(tempfile.mkdtemp(prefix=f".{target.name}.eqdsl-", dir=target.parent))
            _PREPARED.append(self)
            (self.path / MARKER).touch()
            self._lock = hold_lock(self.path)

    def remove(self) -> None:
        if self in _PREPARED:
            _PREPARED.remove(self)
        if (self.path / MARKER).exists():
            shutil.rmtree(self.path, ignore_errors=True)
        else:  # stopped before its marker: the folder mkdtemp made is still empty
            try:
                self.path.rmdir()
            except OSError:
                pass
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
        for folder in self.made_parents:  # deepest first; never one that holds anything now
            try:
                folder.rmdir()
            except OSError:
                break


def _sweep_dead_siblings(target: Path) -> None:
    """Remove the scratch folders of dead runs beside `target` (`worker.sweep_abandoned`),
    first putting back an output folder a killed publish had moved aside."""
    dead = [p for p in target.parent.glob(f".{target.name}.eqdsl-*")
            if p.is_dir() and not p.is_symlink() and (p / MARKER).is_file() and is_abandoned(p)]
    for folder in dead:
        if (folder / "old").is_dir() and not (target.exists() or target.is_symlink()):
            os.rename(folder / "old", target)
    sweep_abandoned(dead)


def _missing_parents(folder: Path) -> list[Path]:
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def stop_if_abandoned() -> None:
    """Publish nothing once the user has killed eqdsl (the worker outlived its supervisor)."""
    if supervisor_gone():
        raise SystemExit(130)


def free_sibling(path: Path, keep_suffix: bool = False) -> Path:
    """The first free name `NAME-1`, `NAME-2`, … beside `path` (a file `out.json` keeps its suffix
    where `keep_suffix`: `out-1.json`); a dangling link's name is not free."""
    stem, suffix = (path.stem, path.suffix) if keep_suffix else (path.name, "")
    n = 1
    while (candidate := path.with_name(f"{stem}-{n}{suffix}")).exists() or candidate.is_symlink():
        n += 1
    return candidate


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask

