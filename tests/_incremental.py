"""Helpers shared by the tests that count a warm call's work (test_incremental_*)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ctxmw.types import Messages
from tests.transcripts import adjacent_calls, call, group


def growing_rounds(start: int, n: int) -> Iterator[Messages]:
    """A transcript of ``start`` adjacent calls, then ``n`` times the same one with a round more."""
    history = adjacent_calls(start)
    for k in range(n):
        history = [*history, *group([call(f"new{k}", "read", path=f"n{k}")], [f"out {k}" * 40])]
        yield history


class CallCounter:
    """Counts the calls of ``module.name`` for the rest of a test (``monkeypatch`` undoes it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> None:
        self.n = 0
        original = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.n += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
