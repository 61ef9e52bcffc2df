"""Counting what an object keeps alive that the garbage collector must walk on each full pass."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterable

# Shared by every session (classes, modules, functions, loggers): not what one session keeps.
_SHARED = (type, type(gc), type(gc.collect), type(lambda: None))


def tracked_reachable(root: object, shared: Iterable[object] = ()) -> Counter[str]:
    """Tracked objects reachable from ``root`` by type name, not walking into ``shared`` ones.

    Run after ``gc.collect()``: the collector stops tracking tuples of atomics during a pass.
    """
    seen, todo, found = {id(o) for o in shared}, [root], Counter[str]()
    while todo:
        obj = todo.pop()
        if id(obj) in seen or not gc.is_tracked(obj) or isinstance(obj, _SHARED):
            continue
        seen.add(id(obj))
        found[type(obj).__name__] += 1
        todo.extend(gc.get_referents(obj))
    return found
