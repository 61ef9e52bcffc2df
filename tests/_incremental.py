"""Helpers shared by the tests that count a warm call's work (test_incremental_*)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from ctxmw import Settings
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.types import Messages, StrategyContext
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


# Small windows, so a few hundred calls already drop, compact and group.
TIGHT = Settings(
    full_tool_outputs=2,
    max_tool_calls=4,
    max_tool_chars=2_000,
    short_output_length=60,
    short_string_length=30,
)


def run_chain(
    messages: Messages, chain: str, memo: dict[str, Any], settings: Settings = TIGHT
) -> tuple[Messages, dict[str, Any]]:
    """``chain`` applied to ``messages`` with ``memo`` kept: the prompt and the stats."""
    ctx = StrategyContext(settings=settings, memo=memo)
    out = anyio.run(apply_strategies, messages, resolve_strategies(chain, settings), ctx)
    return out, ctx.stats
