"""Counting what an object keeps alive that the garbage collector must walk on each full pass."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterable
from typing import Any

# Shared by every session (classes, modules, functions, loggers): not what one session keeps.
_SHARED = (type, type(gc), type(gc.collect), type(lambda: None))


def tracked_reachable(root: object, shared: Iterable[object] = ()) -> Counter[str]:
    """Tracked objects reachable from ``root`` by type name, not walking into ``shared`` ones.

    Run after ``gc.collect()``: the collector stops tracking tuples of atomics during a pass.
    """
    return Counter(type(o).__name__ for o in _reachable(root, {id(o) for o in shared}))


def tracked_beyond(root: Any, outside: Any) -> int:
    """The tracked objects reachable from ``root`` and not from ``outside`` (a transcript).

    What a full gc pass walks for ``root``'s sake.
    """
    skip = {id(o) for o in _reachable(outside, set())}
    return len(_reachable(root, skip))


def _reachable(root: object, skip: set[int]) -> list[object]:
    seen, todo, found = set(skip), [root], []
    while todo:
        obj = todo.pop()
        if id(obj) in seen or not gc.is_tracked(obj) or isinstance(obj, _SHARED):
            continue
        seen.add(id(obj))
        found.append(obj)
        todo.extend(gc.get_referents(obj))
    return found
