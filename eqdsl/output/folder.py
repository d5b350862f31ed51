"""An output folder: which folders may be written, which files in one are eqdsl's (the marker),
and the `Scratch` a run writes into before it publishes."""
from __future__ import annotations

import os
import pwd
import re
from pathlib import Path
from typing import Iterable

from eqdsl.diagnostics import EqdslError
from eqdsl.output.files import write_file_atomically
from eqdsl.output.sibling import MARKER, Sibling, free_sibling, stop_if_abandoned
from eqdsl.worker import say_published, say_publishing

MARKER_HEADER = "written by eqdsl; `eqdsl run` may replace this folder. Files eqdsl wrote here:"
EXPORT_FILES = frozenset(f"{model}.onnx{data}" for model in ("input", "optimized") for data in ("", ".data"))
RESULT_FILES = frozenset({MARKER, "report.json", "optimized.eqr", "egraph.json", "report.html"}) | EXPORT_FILES
# names a stage writes that vary with the run (`exports/onnx.py`: extract.candidates, the written input)
RESULT_PATTERNS = (re.compile(r"candidate-\d+\.onnx(\.data)?"), re.compile(r"written\.onnx(\.data)?"))


def is_result_name(name: str) -> bool:
    """A name some stage of `eqdsl run` may write into its output folder."""
    return name in RESULT_FILES or any(p.fullmatch(name) for p in RESULT_PATTERNS)


def _refuse(folder: Path, why: str) -> EqdslError:
    return EqdslError.one(f"refusing to write results into {folder}: {why}; expected a folder of "
                          "its own (for example results/NAME)", path="output")


def project_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / ".git").exists() or (folder / "pyproject.toml").exists():
            return folder
    return None


def home_folders() -> set[Path]:
    """Every user's home folder ($HOME and the password database's), resolved; never `/`."""
    homes = {os.path.expanduser("~")} | {entry.pw_dir for entry in pwd.getpwall()}
    return {Path(h).resolve() for h in homes if h and Path(h).is_absolute() and h != "/"}


def protected_reason(out: Path) -> str | None:
    """Why `out` (resolved) may never hold results, or None: a filesystem root, a mount point,
    a home folder or a folder containing one."""
    if out == Path(out.anchor):
        return "it is a filesystem root"
    if out.is_dir() and os.path.ismount(out):
        return "it is a mount point"
    for home in sorted(home_folders()):
        if out == home or out in home.parents:
            return f"it is (or contains) the home folder {home}"
    return None


def resolved(path: Path, what: str) -> Path:
    """`path` with `~` expanded and links followed; `EqdslError` naming `what` on a symlink loop."""
    try:
        return path.expanduser().resolve()
    except (RuntimeError, OSError) as err:  # Python raises RuntimeError for a symlink loop
        raise EqdslError.one(f"cannot follow {path}: {err}; expected a path without a symlink loop",
                             path=what) from None


def check_output(folder: Path, inputs: Iterable[Path] = (), force: bool = False) -> Path:
    """The resolved output folder, if eqdsl may write its results there (see the contract)."""
    out = resolved(folder, "output")
    if (why := protected_reason(out)) is not None:
        raise _refuse(folder, why)
    cwd = Path.cwd().resolve()
    if out == cwd:
        raise _refuse(folder, "it is the current directory")
    if out in cwd.parents:
        raise _refuse(folder, f"it contains the current directory {cwd}")
    root = project_root(cwd)
    if root is not None and (out == root or out in root.parents):
        raise _refuse(folder, f"it is (or contains) the project root {root}")
    for path in inputs:
        p = resolved(path, "output")
        if out == p or out in p.parents:
            raise _refuse(folder, f"it contains the input {path}")
    if out.exists() and not out.is_dir():
        raise EqdslError.one(f"expected a folder for the results, found a file: {folder}", path="output")
    entries = [p for p in out.iterdir() if is_result_name(p.name)] if out.is_dir() else []
    if (clash := [p.name for p in entries if p.is_dir() or p.is_symlink()]):
        raise EqdslError.one(f"output folder {folder} holds {', '.join(sorted(clash))}, which is not a "
                             "file eqdsl wrote; expected a folder without it", path="output")
    foreign = foreign_files(out)
    if foreign and not force:
        raise EqdslError.one(
            f"output folder {folder} holds files eqdsl did not write ({_listed(foreign)}); expected an "
            "empty folder or one an earlier `eqdsl run` made. Choose another folder, move the files, or "
            "pass --force to write the results into it beside them (they are kept)", path="output")
    if clash := sorted(n for n in foreign if is_result_name(n)):
        raise EqdslError.one(
            f"output folder {folder} holds {_listed(clash)}, which eqdsl did not write and would replace; "
            "--force never overwrites a file eqdsl did not write. Move or rename it, or choose another "
            "folder", path="output")
    return out


def eqdsl_files(folder: Path) -> frozenset[str]:
    """The files of `folder` eqdsl wrote: those its marker lists with the size and modification
    time they still have (none without a marker; a listed name without them, or whose file has
    changed, is not eqdsl's)."""
    try:
        lines = (folder / MARKER).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return frozenset()
    ours = {MARKER}
    for line in lines[1:]:
        name, _, stamp = line.partition("\t")
        if name and "/" not in name and stamp and stamp == _stamp(folder / name):
            ours.add(name)
    return frozenset(ours)


def _stamp(path: Path) -> str | None:
    """`size<TAB>mtime_ns` of a regular file (not a link), or None."""
    try:
        st = path.lstat()
    except OSError:
        return None
    return f"{st.st_size}\t{st.st_mtime_ns}" if path.is_file() and not path.is_symlink() else None


def foreign_files(folder: Path) -> list[str]:
    """The entries of `folder` eqdsl did not write, sorted ([] if none or no folder)."""
    if not folder.is_dir():
        return []
    ours = eqdsl_files(folder)
    return sorted(p.name for p in folder.iterdir() if p.name not in ours or not p.is_file())


def _listed(names: list[str], most: int = 5) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


class Scratch:
    """Where a run's results are written before they are published (see the contract)."""

    def __init__(self, folder: Path, force: bool = False) -> None:
        self.folder, self.force = resolved(folder, "output"), force
        self._sibling = Sibling(self.folder)
        self.path = self._sibling.path
        self.new = self.path / "new"
        self.new.mkdir()  # mode from the umask, like any folder the user makes
        self._aside = self.path / "old"
        self.kept: list[str] = []  # files not eqdsl's that a --force publish left in the folder

    def publish(self) -> Path:
        """Put the results in place; returns where they went."""
        stop_if_abandoned()
        say_publishing()
        place = self._put_in_place()
        say_published(place)
        return place

    def _put_in_place(self) -> Path:
        written = sorted(p.name for p in self.new.iterdir())
        _write_marker(self.new, written)
        foreign = foreign_files(self.folder)
        if foreign and (not self.force or any(is_result_name(n) or n in written for n in foreign)):
            return self._beside()
        if foreign or (self.folder.exists() and not (self.folder / MARKER).is_file()):
            self._merge(foreign)  # a folder eqdsl did not make stays; only files are put into it
            return self.folder
        if self.folder.exists():
            os.rename(self.folder, self._aside)
            if foreign_files(self._aside):  # a file arrived since the check: give the folder back
                os.rename(self._aside, self.folder)
                return self._beside()
        os.rename(self.new, self.folder)
        return self.folder

    def _beside(self) -> Path:
        target = free_sibling(self.folder)
        os.rename(self.new, target)
        return target

    def _merge(self, foreign: list[str]) -> None:
        """--force into a folder with other files: replace eqdsl's files one by one."""
        written = {p.name for p in self.new.iterdir()} - {MARKER}
        for name in sorted(eqdsl_files(self.folder) - written - {MARKER}):
            stale = self.folder / name
            if stale.is_file() and not stale.is_symlink():
                stale.unlink()
        for name in sorted(written):
            os.replace(self.new / name, self.folder / name)
        os.replace(self.new / MARKER, self.folder / MARKER)
        self.kept = [n for n in foreign if n not in written]

    def discard(self) -> None:
        if self._aside.exists() and not self.folder.exists():
            os.rename(self._aside, self.folder)
        self._sibling.remove()


def add_result_file(folder: Path, name: str, text: str) -> Path:
    """Write `name` (one of RESULT_FILES) into `folder`, an eqdsl output folder (its marker), after
    the run that made it (`eqdsl report`): replaced atomically if eqdsl wrote it, refused if a file
    of that name is someone else's; the marker then lists it."""
    if name not in RESULT_FILES or not (folder / MARKER).is_file():
        raise EqdslError.one(f"{folder}: expected an output folder of `eqdsl run` (it holds {MARKER}); found none")
    ours = eqdsl_files(folder)
    target = folder / name
    if (target.exists() or target.is_symlink()) and (name not in ours or not target.is_file()):
        raise EqdslError.one(f"{target} is not a file eqdsl wrote; eqdsl never replaces it. Move or rename it")
    write_file_atomically(target, text)
    write_file_atomically(folder / MARKER, _marker_text(folder, sorted(ours - {MARKER} | {name})))
    return target


def _marker_text(folder: Path, names: list[str]) -> str:
    """The marker's lines for the files `names` of `folder` (the marker itself is not listed)."""
    listed = [f"{n}\t{stamp}" for n in names if n != MARKER and (stamp := _stamp(folder / n)) is not None]
    return "\n".join([MARKER_HEADER, *listed]) + "\n"


def _write_marker(folder: Path, names: list[str]) -> None:
    (folder / MARKER).write_text(_marker_text(folder, names))

