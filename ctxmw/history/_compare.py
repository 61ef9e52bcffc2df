"""Where two lists stop agreeing: the comparisons every part of :mod:`ctxmw.history` makes."""

from __future__ import annotations

from collections.abc import Sequence
from operator import is_, is_not
from typing import Any

__all__ = ["compare_prefix", "identical_prefix"]


def identical_prefix(previous: Sequence[Any], current: Sequence[Any], upto: int) -> int:
    """How many of the first ``upto`` messages of ``current`` are ``previous``'s own objects
    (one C-speed pass when all are the same)."""
    head, tail = previous, current  # map stops at the shorter: no copies
    if upto < min(len(previous), len(current)):
        head, tail = previous[:upto], current[:upto]
    if all(map(is_, head, tail)):
        return upto
    return bytes(map(is_not, head, tail)).index(1)


def compare_prefix(previous: Sequence[Any], current: Sequence[Any]) -> int:
    """How many messages ``current`` starts with that equal ``previous``'s (identity first).

    Two byte strings (a renderer's runs) are compared byte by byte the same way.
    """
    m = min(len(previous), len(current))
    head: Sequence[Any]
    tail: Sequence[Any]
    if isinstance(previous, bytes) and isinstance(current, bytes):
        head, tail = previous[:m], current[:m]  # byte strings compare and slice in C as they are
    else:
        head = _as_list(previous, m)
        tail = _as_list(current, m)
    if head == tail:  # identical objects compare in C without looking inside them
        return m
    lo, hi = 0, m  # head[:lo] == tail[:lo] and head[:hi] != tail[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if head[lo:mid] == tail[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _as_list(items: Sequence[Any], m: int) -> list[Any]:
    """``items[:m]`` as a list: the list itself when it is one of that length (no copy), one
    slice of a list (a slice is a new list already), a copy of anything else."""
    if isinstance(items, list):
        return items if len(items) == m else items[:m]
    return list(items[:m])
