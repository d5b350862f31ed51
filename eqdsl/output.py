"""Output folders and files: eqdsl never deletes or overwrites a file it did not write.

Contract:
- `check_output(folder, inputs, force)` returns the resolved folder (`~` expanded: the path
  checked is the path written) or refuses (EqdslError naming `output`): the current directory
  or a folder containing it; the project root (nearest folder above the current one with `.git`
  or `pyproject.toml`) or one containing it; a filesystem root, a mount point, a home folder
  (any user's) or a folder containing one; a folder holding an input file; an existing file;
  and, without `force`, a folder holding files eqdsl did not write (they are listed).
- eqdsl's folders carry the marker `.eqdsl-output`, which lists the files eqdsl wrote there,
  each with its size and modification time: a listed name counts as eqdsl's only while the file
  still has them (a name added to the marker by hand, or a file replaced since, is the user's).
- A result name is one of `RESULT_FILES` or matches `RESULT_PATTERNS` (`candidate-2.onnx`,
  `written.onnx`, …): every name a stage may write. A user's file with such a name is never
  overwritten, even with `force`.
- `Scratch(folder, force)` is a new hidden sibling folder where results are written
  (`scratch.new`); `publish()` renames them into place:
  - a missing folder, or one eqdsl made (its marker) holding only eqdsl's files: the whole folder
    is swapped in one rename (a reader sees the old results or the new ones, never a mix); the old
    one, moved aside, is checked again before it is removed with the scratch folder;
  - an empty folder eqdsl did not make: the files are renamed into it, the folder itself stays;
  - with `force`, a folder holding other files: each result file is renamed into it on its own,
    eqdsl's stale result files are removed, and every other file stays as it was. `--force`
    never deletes or overwrites a file eqdsl did not write: a user's file with a result's name
    (`report.json`) is refused by `check_output` even with `force`.
  If a user's file appeared in the folder during the run (without `force`; with it, one with a
  result's name), the results go to a new sibling `NAME-1` and the folder is not touched.
  `discard()` removes the scratch folder (only one carrying eqdsl's marker), puts a moved-aside
  output back if the new one never arrived, and removes the (empty) parent folders the scratch
  folder's creation made.
- `FileScratch(path, force, flag)`, for commands that write one file (and companions such as an
  ONNX weights file): refuses an existing file without `force` before any work, gives a hidden
  sibling folder to write into, `publish(names)` moves each file into place without ever
  replacing a file that appeared there during the work (with `force`, only a file that was there
  before the work is replaced): a single file then goes to a free sibling name (`out-1.json`,
  returned), several are refused with an error and the target left alone.
Both kinds of scratch are made by the supervisor before the worker starts, so an interrupted
or killed run leaves nothing behind: the supervisor (or its janitor) removes them.
"""
from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Callable, Iterable

from eqdsl.diagnostics import EqdslError
from eqdsl.worker import hold_lock, is_abandoned, supervisor_gone, sweep_abandoned

MARKER = ".eqdsl-output"
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


_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
_PREPARED: list[_Sibling] = []  # made in this process and not removed: what a stop before the work removes


def remove_prepared() -> None:
    """Remove every scratch folder this process made and has not removed (a stop that came
    while a command prepared its output, before it handed the scratch to its clean-up)."""
    for sibling in list(_PREPARED):
        sibling.remove()


class _Sibling:
    """A hidden folder beside `target`, marked as eqdsl's, made with any missing parents."""

    def __init__(self, target: Path) -> None:
        self.made_parents = _missing_parents(target.parent)
        target.parent.mkdir(parents=True, exist_ok=True)
        _sweep_dead_siblings(target)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)  # made and registered, or neither
        try:
            self.path = Path(tempfile.mkdtemp(prefix=f".{target.name}.eqdsl-", dir=target.parent))
            _PREPARED.append(self)
            (self.path / MARKER).touch()
            self._lock: int | None = hold_lock(self.path)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def remove(self) -> None:
        if self in _PREPARED:
            _PREPARED.remove(self)
        if (self.path / MARKER).exists():
            shutil.rmtree(self.path, ignore_errors=True)
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


class Scratch:
    """Where a run's results are written before they are published (see the contract)."""

    def __init__(self, folder: Path, force: bool = False) -> None:
        self.folder, self.force = resolved(folder, "output"), force
        self._sibling = _Sibling(self.folder)
        self.path = self._sibling.path
        self.new = self.path / "new"
        self.new.mkdir()  # mode from the umask, like any folder the user makes
        self._aside = self.path / "old"
        self.kept: list[str] = []  # files not eqdsl's that a --force publish left in the folder

    def publish(self) -> Path:
        """Put the results in place; returns where they went."""
        _stop_if_abandoned()
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
        target = _free_sibling(self.folder)
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


def _stop_if_abandoned() -> None:
    """Publish nothing once the user has killed eqdsl (the worker outlived its supervisor)."""
    if supervisor_gone():
        raise SystemExit(130)


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


def _free_sibling(folder: Path) -> Path:
    n = 1
    while (candidate := folder.with_name(f"{folder.name}-{n}")).exists():
        n += 1
    return candidate


def check_new_file(path: Path, force: bool, flag: str) -> None:
    """`path` may be written: its folder exists, and it is a new file (or `force`, a file)."""
    if not path.parent.is_dir():
        raise EqdslError.one(f"{flag}: expected a path in an existing folder, got {path} "
                             f"({path.parent} does not exist)")
    if path.is_dir():
        raise EqdslError.one(f"{flag}: expected a file path, got the folder {path}")
    if (path.exists() or path.is_symlink()) and not force:
        raise EqdslError.one(f"{flag}: {path} already exists; expected a new file name "
                             "(or --force to replace it)")


class FileScratch:
    """A command's output file (and companions), written beside it first (see the contract)."""

    def __init__(self, path: Path, force: bool, flag: str) -> None:
        check_new_file(path, force, flag)
        self.target, self.force, self.flag = path, force, flag
        # what --force may replace: the files there now (a companion's name is known only at the end)
        self._replaceable = {p.name for p in path.parent.iterdir()} if force else set()
        self._sibling = _Sibling(path)
        self.folder = self._sibling.path

    @property
    def file(self) -> Path:
        """Where to write the output file itself."""
        return self.folder / self.target.name

    def write_text(self, text: str) -> Path:
        self.file.write_text(text)
        return self.publish([self.target.name])

    def publish(self, names: Iterable[str]) -> Path:
        """Move each written file into the target's folder (companions checked like it); returns
        where the first one went: the target, or a free sibling name if a file appeared there."""
        names = list(names)
        for name in names[1:]:
            check_new_file(self.target.parent / name, self.force, f"{self.flag} (its file {name})")
        _stop_if_abandoned()
        places = [self.target.parent / name for name in names]
        for name in names:
            os.chmod(self.folder / name, 0o666 & ~_umask())
        if len(names) == 1:
            if not self._move(names[0], places[0]):  # one file: to a free name beside the target
                places[0] = _free_file_sibling(self.target)
                _move_without_replacing(self.folder / names[0], places[0])
            return places[0]
        # files that belong together (a model and its weights): all of them or none
        blocked = [place for name, place in zip(names, places)
                   if (place.exists() or place.is_symlink()) and not self._replaceable_at(name, place)]
        for name, place in zip(names, places):
            if blocked or not self._move(name, place):
                raise EqdslError.one(f"{self.flag}: {(blocked or [place])[0]} appeared while eqdsl ran; it was "
                                     f"left alone. Run again with a free name")
        return places[0]

    def _replaceable_at(self, name: str, place: Path) -> bool:
        return self.force and name in self._replaceable and place.is_file() and not place.is_symlink()

    def _move(self, name: str, place: Path) -> bool:
        """Move a written file to `place`; False (nothing moved) where a file there may not be replaced."""
        if self._replaceable_at(name, place):
            os.replace(self.folder / name, place)
            return True
        return _move_without_replacing(self.folder / name, place)

    def discard(self) -> None:
        self._sibling.remove()


def _move_without_replacing(source: Path, place: Path) -> bool:
    """Rename `source` to `place` unless something is there, atomically where the file system has
    hard links (a link to an existing name fails); False if something was there."""
    try:
        os.link(source, place)
    except FileExistsError:
        return False
    except OSError:  # no hard links here: check, then rename (a narrow window, the best on offer)
        if place.exists() or place.is_symlink():
            return False
        os.rename(source, place)
        return True
    source.unlink()
    return True


def _free_file_sibling(path: Path) -> Path:
    n = 1
    while (candidate := path.with_name(f"{path.stem}-{n}{path.suffix}")).exists() or candidate.is_symlink():
        n += 1
    return candidate


def write_file_atomically(path: Path, text: str) -> None:
    """`text` into `path` through a temporary sibling and a rename: never a half-written file."""
    replace_atomically(path, lambda tmp: tmp.write_text(text))


def replace_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """`write(tmp)` fills a temporary sibling of `path` (same suffix), which is then renamed onto
    `path`: readers see the old file or the whole new one. Only the temporary file is ever removed."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # our own temporary file
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
