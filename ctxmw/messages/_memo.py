"""Per-session memoisation: what is derived from a transcript lives and dies with its session.

The strategy chain runs every strategy inside :func:`session_memo` with the session's memo
(``StrategyContext.memo``); helpers decorated with :func:`memoised` (shortening a result, durable
items, call keys, token counts) keep their results in a :class:`BoundedCache` stored in that memo.
When the session is dropped, everything it cached goes with it: nothing keyed by transcript
content outlives its conversation. A one-off call gets a memo of its own for the call's
duration; a helper called outside any chain computes without caching.

Each cache is bounded by bytes (the lengths of the strings and bytes in its keys and values), so
a long session cannot grow it past ``max_bytes`` either.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

__all__ = [
    "DEFAULT_MAX_BYTES",
    "BoundedCache",
    "active_memo",
    "memoised",
    "session_cache",
    "session_memo",
]

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
"""Bytes one cache of one session may hold (keys and values), the oldest entries going first."""

_OBJECT = 64  # what a non-text key or value is counted as
_MISSING = object()

_current: ContextVar[dict[str, Any] | None] = ContextVar("ctxmw_session_memo", default=None)


@contextmanager
def session_memo(memo: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    """Make ``memo`` (a fresh dict when None) the memo of every :func:`memoised` call inside."""
    active = {} if memo is None else memo
    token = _current.set(active)
    try:
        yield active
    finally:
        _current.reset(token)


def active_memo() -> dict[str, Any] | None:
    """The memo of the running chain (None outside one)."""
    return _current.get()


def session_cache(slot: str, max_bytes: int = DEFAULT_MAX_BYTES) -> BoundedCache | None:
    """The running session's cache named ``slot`` (made on first use); None outside a chain."""
    memo = _current.get()
    if memo is None:
        return None
    cache = memo.get(slot)
    if not isinstance(cache, BoundedCache):
        cache = memo[slot] = BoundedCache(max_bytes)
    return cache


class BoundedCache:
    """A least-recently-used mapping bounded by the bytes of its keys and values.

    Args:
        max_bytes: the most it holds; an entry larger than that is not kept at all.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value for ``key`` (now the most recently used), else ``default``."""
        entry = self._entries.get(key)
        if entry is None:
            return default
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: Hashable, value: Any, size: int | None = None) -> None:
        """Keep ``value`` for ``key``, dropping the least recently used entries past the bound.

        Args:
            key: the key.
            value: the value.
            size: what the entry holds, when the caller knows better than the lengths of its
                strings (an object holding the key's text again).
        """
        size = _size(key) + _size(value) if size is None else size
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        if size > self.max_bytes:
            return
        self._entries[key] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped


def memoised(
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Cache a pure function's results in the running session's memo (positional, hashable args).

    Outside a session (no chain running) the function is simply called. Results are returned as
    cached: a function whose callers rely on identity should return None for "unchanged".
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        slot = f"memo:{fn.__module__}.{fn.__qualname__}"

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            cache = session_cache(slot, max_bytes)
            if cache is None or kwargs:
                return fn(*args, **kwargs)
            found = cache.get(args, _MISSING)
            if found is not _MISSING:
                return found  # type: ignore[no-any-return]  # stored by this wrapper: an R
            value = fn(*args, **kwargs)
            cache.put(args, value)
            return value

        return wrapper

    return decorate


def _size(value: Any) -> int:
    if isinstance(value, str | bytes):
        return len(value) + 49
    if isinstance(value, tuple):
        return sum(map(_size, value)) + 40
    return _OBJECT
