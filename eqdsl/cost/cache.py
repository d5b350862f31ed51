"""A persistent timing cache: SQLite, one row per (device, operator, arguments).

Contract: `TimingCache(path)` opens (creating) the database; `get(device, op, args)` returns the
cached nanoseconds or None; `put(device, op, args, ns, runs)` records a measurement — the first
writer of a key wins, so concurrent runs measuring the same key agree afterwards. Safe with
several processes writing at once (WAL journal, a busy timeout, one short transaction per write).
`device` names everything a timing depends on (backend, runtime version, processor, threads).
A path holding anything but an eqdsl timing cache (text, another program's database, a folder) is
an `EqdslError`, checked read-only before anything is written.
"""
from __future__ import annotations

import datetime
import json
import sqlite3
from pathlib import Path
from typing import Any

from eqdsl.diagnostics import EqdslError
from eqdsl.user_cache import user_cache_dir

SCHEMA = """CREATE TABLE IF NOT EXISTS timings (
    device TEXT NOT NULL, op TEXT NOT NULL, args TEXT NOT NULL,
    ns REAL NOT NULL, runs INTEGER NOT NULL, measured_at TEXT NOT NULL,
    PRIMARY KEY (device, op, args))"""


def default_cache_path() -> Path:
    return user_cache_dir() / "timings.sqlite"


def args_key(args: tuple[Any, ...]) -> str:
    return json.dumps(args, separators=(",", ":"))


COLUMNS = ("device", "op", "args", "ns", "runs", "measured_at")


def check_cache_file(path: Path) -> None:
    """Raise `EqdslError` unless `path` is absent, empty, or an eqdsl timing cache — read-only, so
    a file that is something else (another program's database, text, a folder) is never altered."""
    if not path.exists():
        return
    if not path.is_file():
        raise EqdslError.one(f"timing cache {path}: not a regular file (a directory or a device)")
    if path.stat().st_size == 0:
        return
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            columns = tuple(r[1] for r in db.execute("PRAGMA table_info(timings)"))
            health = db.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            db.close()
    except sqlite3.DatabaseError as err:
        raise EqdslError.one(f"timing cache {path}: not an SQLite database ({err}); expected eqdsl's timing "
                             "cache, or a path where none exists yet") from None
    if health != "ok":
        raise EqdslError.one(f"timing cache {path}: damaged ({health}); delete it to start a new one")
    if tables != ["timings"] or columns != COLUMNS:
        raise EqdslError.one(f"timing cache {path}: an SQLite database that is not eqdsl's (tables: "
                             f"{', '.join(tables) or 'none'}); expected one table `timings` "
                             f"({', '.join(COLUMNS)}) — choose another path")


class TimingCache:
    """The SQLite timing cache. An SQLite failure after the file was checked (another process holds
    it locked past the 30 s wait, the disk is full, the file changed under us) is an `EqdslError`
    naming the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        check_cache_file(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=30.0, isolation_level=None)  # autocommit: short writes
        self._execute("PRAGMA journal_mode=WAL")
        self._execute(SCHEMA)

    def _execute(self, sql: str, values: tuple = ()) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, values)
        except sqlite3.Error as err:
            raise EqdslError.one(f"timing cache {self.path}: {err} (another eqdsl run may hold it; if the "
                                 "file is damaged, delete it to start a new one)") from None

    def get(self, device: str, op: str, args: tuple[Any, ...]) -> float | None:
        row = self._execute("SELECT ns FROM timings WHERE device = ? AND op = ? AND args = ?",
                            (device, op, args_key(args))).fetchone()
        return None if row is None else float(row[0])

    def put(self, device: str, op: str, args: tuple[Any, ...], ns: float, runs: int) -> float:
        """Record a timing; returns the value stored for the key (an earlier writer's, if any)."""
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        self._execute("INSERT OR IGNORE INTO timings VALUES (?, ?, ?, ?, ?, ?)",
                      (device, op, args_key(args), ns, runs, now))
        stored = self.get(device, op, args)
        assert stored is not None
        return stored

    def count(self, device: str | None = None) -> int:
        if device is None:
            return int(self._execute("SELECT COUNT(*) FROM timings").fetchone()[0])
        return int(self._execute("SELECT COUNT(*) FROM timings WHERE device = ?", (device,)).fetchone()[0])

    def close(self) -> None:
        self._db.close()
