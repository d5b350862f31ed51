"""One output file (and its companions) written beside its place and moved in without replacing
anything that appeared there (`FileScratch`); a file replaced atomically."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable

from eqdsl.diagnostics import EqdslError
from eqdsl.output.sibling import Sibling, free_sibling, stop_if_abandoned, umask
from eqdsl.worker import say_published, say_publishing


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
        self._sibling = Sibling(path)
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
        stop_if_abandoned()
        say_publishing()
        place = self._put_in_place(names)
        say_published(place)
        return place

    def _put_in_place(self, names: list[str]) -> Path:
        places = [self.target.parent / name for name in names]
        for name in names:
            os.chmod(self.folder / name, 0o666 & ~umask())
        if len(names) == 1:
            if not self._move(names[0], places[0]):  # one file: to a free name beside the target
                places[0] = free_sibling(self.target, keep_suffix=True)
                move_without_replacing(self.folder / names[0], places[0])
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
        return move_without_replacing(self.folder / name, place)

    def discard(self) -> None:
        self._sibling.remove()


def move_without_replacing(source: Path, place: Path) -> bool:
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


def write_file_atomically(path: Path, text: str) -> None:
    """`text` into `path` through a temporary sibling and a rename: never a half-written file."""
    replace_atomically(path, lambda tmp: tmp.write_text(text))


def replace_atomically(path: Path, write: Callable[[Path], object], mode: int | None = None) -> None:
    """`write(tmp)` fills a file in a scratch folder beside `path` (a `Sibling`: locked while this
    run lives, swept by the next run that writes `path` once it is dead, even by SIGKILL), which
    is then renamed onto `path`: readers see the old file or the whole new one. Only the scratch
    is ever removed. The file gets `mode` (a replaced file's own), else the umask's default."""
    scratch = Sibling(path)
    try:
        tmp = scratch.path / f"new{path.suffix}"
        write(tmp)
        os.chmod(tmp, mode if mode is not None else 0o666 & ~umask())
        os.replace(tmp, path)
    finally:
        scratch.remove()

