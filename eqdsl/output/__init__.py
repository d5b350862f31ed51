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

from eqdsl.output.files import FileScratch, check_new_file, replace_atomically, write_file_atomically
from eqdsl.output.folder import (
    EXPORT_FILES,
    RESULT_FILES,
    Scratch,
    add_result_file,
    check_output,
    eqdsl_files,
    foreign_files,
    is_result_name,
)
from eqdsl.output.sibling import MARKER, remove_prepared

__all__ = [
    "EXPORT_FILES",
    "FileScratch",
    "MARKER",
    "RESULT_FILES",
    "Scratch",
    "add_result_file",
    "check_new_file",
    "check_output",
    "eqdsl_files",
    "foreign_files",
    "is_result_name",
    "remove_prepared",
    "replace_atomically",
    "write_file_atomically",
]
