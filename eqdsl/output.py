"""Output folders: eqdsl writes only into folders it made, and never where a user's files live.

Contract:
- `check_output(folder, inputs, force)` refuses (EqdslError naming `output`) the current
  directory or any folder containing it, the project root (nearest folder above the current one
  with `.git` or `pyproject.toml`) or any folder containing it, a folder holding an input file,
  an existing file, and an existing folder with files eqdsl did not write (unless `force`).
- `Scratch(folder)` is a new hidden sibling folder (marked as eqdsl's) where results are
  written (`scratch.new`); `publish()` renames them into place, moving an existing output aside
  first, so a reader sees the old results or the new ones, never a mix. The folder is checked
  again then: if a user's file appeared in it during the run, the results go to a new sibling
  `NAME-1` instead and the folder is not touched. `discard()` removes the
  scratch folder (only ever one carrying eqdsl's marker) and puts a moved-aside output back if
  the new one never arrived.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterable

from eqdsl.diagnostics import EqdslError

MARKER = ".eqdsl-output"
EXPORT_FILES = frozenset(f"{model}.onnx{data}" for model in ("input", "optimized") for data in ("", ".data"))
RESULT_FILES = frozenset({MARKER, "report.json", "optimized.eqr", "egraph.json"}) | EXPORT_FILES


def _refuse(folder: Path, why: str) -> EqdslError:
    return EqdslError.one(f"refusing to write results into {folder}: {why}; expected a folder of "
                          "its own (for example results/NAME)", path="output")


def project_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / ".git").exists() or (folder / "pyproject.toml").exists():
            return folder
    return None


def check_output(folder: Path, inputs: Iterable[Path] = (), force: bool = False) -> Path:
    """The resolved output folder, if eqdsl may write its results there (see the contract)."""
    out = folder.expanduser().resolve()
    cwd = Path.cwd().resolve()
    if out == cwd:
        raise _refuse(folder, "it is the current directory")
    if out in cwd.parents:
        raise _refuse(folder, f"it contains the current directory {cwd}")
    root = project_root(cwd)
    if root is not None and (out == root or out in root.parents):
        raise _refuse(folder, f"it is (or contains) the project root {root}")
    for path in inputs:
        p = path.expanduser().resolve()
        if out == p or out in p.parents:
            raise _refuse(folder, f"it contains the input {path}")
    if out.exists() and not out.is_dir():
        raise EqdslError.one(f"expected a folder for the results, found a file: {folder}", path="output")
    if not force and (foreign := foreign_files(out)):
        raise EqdslError.one(
            f"output folder {folder} holds files eqdsl did not write ({foreign}); expected an empty "
            "folder or one an earlier `eqdsl run` made. Choose another folder, move the files, or "
            "pass --force to replace the folder", path="output")
    return out


def foreign_files(folder: Path) -> str:
    """The files in `folder` eqdsl did not write, for a message ('' if none or no folder)."""
    if not folder.is_dir():
        return ""
    names = sorted(p.name for p in folder.iterdir())
    foreign = [n for n in names if n not in RESULT_FILES]
    if not foreign and names and MARKER not in names:
        return "files without eqdsl's marker"
    return ", ".join(foreign[:5]) + (" …" if len(foreign) > 5 else "")


class Scratch:
    """A hidden sibling of the output folder that results are written into first."""

    def __init__(self, folder: Path, force: bool = False) -> None:
        self.folder, self.force = folder, force
        folder.parent.mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=f".{folder.name}.eqdsl-", dir=folder.parent))
        (self.path / MARKER).touch()
        self.new = self.path / "new"
        self.new.mkdir()  # mode from the umask, like any folder the user makes
        (self.new / MARKER).write_text("written by eqdsl; `eqdsl run` may replace this folder\n")
        self._aside = self.path / "old"

    def publish(self) -> Path:
        """Rename the results into place; returns where they went. If files appeared in the
        output folder during the run, it is left alone and the results go to a new sibling."""
        if not self.force and foreign_files(self.folder):
            target = _free_sibling(self.folder)
            os.rename(self.new, target)
            return target
        if self.folder.exists():
            os.rename(self.folder, self._aside)
        os.rename(self.new, self.folder)
        return self.folder

    def discard(self) -> None:
        if self._aside.exists() and not self.folder.exists():
            os.rename(self._aside, self.folder)
        if (self.path / MARKER).exists():
            shutil.rmtree(self.path, ignore_errors=True)


def _free_sibling(folder: Path) -> Path:
    n = 1
    while (candidate := folder.with_name(f"{folder.name}-{n}")).exists():
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
