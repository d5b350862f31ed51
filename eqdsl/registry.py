"""One registry shape for every kind of plug-in (program sources, schedules, extractors, target
kinds, exports, stages): things of one kind by name.

Contract: `Registry(kind, group)` is a read-only `Mapping` name → item, filled by `register(item)`
(under the item's `name` attribute, or the name given; `on_register(name, item)` then runs, for
what a kind offers elsewhere) and, the first time it is read, by the entry points of `group`
(each loads an item, registered under its own name; a plug-in package names the group in its
`pyproject.toml`). `lookup(name, path)` is the item or an `EqdslError` at the config `path`:
"unknown <kind> 'x'; expected one of: a, b (did you mean …?)". Registering a name twice
replaces the first (a plug-in may override a shipped kind on purpose).
"""
from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Generic, TypeVar

from eqdsl.diagnostics import EqdslError

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    def __init__(self, kind: str, group: str | None = None,
                 on_register: Callable[[str, T], None] = lambda name, item: None) -> None:
        self.kind, self.group, self.on_register = kind, group, on_register
        self._items: dict[str, T] = {}
        self._loaded = group is None

    def register(self, item: T, name: str | None = None) -> T:
        name = name if name is not None else _name_of(item)
        self._items[name] = item
        self.on_register(name, item)
        return item

    def _plugins(self) -> dict[str, T]:
        if not self._loaded:
            self._loaded = True  # first: a plug-in that reads the registry must not load it again
            from importlib.metadata import entry_points

            for point in entry_points(group=self.group or ""):
                self.register(point.load())
        return self._items

    def __getitem__(self, name: str) -> T:
        return self._plugins()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._plugins()))

    def __len__(self) -> int:
        return len(self._plugins())

    def names(self) -> list[str]:
        return list(self)

    def copy(self) -> Registry[T]:
        """The same kind with the same items, to register into without changing this one (tests)."""
        other: Registry[T] = Registry(self.kind, on_register=self.on_register)
        other._items = dict(self._plugins())
        return other

    def lookup(self, name: Any, path: str | None = None) -> T:
        if isinstance(name, str) and name in self:
            return self[name]
        close = difflib.get_close_matches(name, self.names(), n=1) if isinstance(name, str) else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise EqdslError.one(f"unknown {self.kind} {name!r}; expected one of: {', '.join(self.names())}{hint}",
                             path=path)


def _name_of(item: Any) -> str:
    name = getattr(item, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"register({item!r}): give its name, it has no `name` attribute")
    return name
