"""compact's counts, turn starts and summary kept between fold steps (history.kept_*)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ctxmw import Settings
from ctxmw.context.survival import message_text as validate_text
from ctxmw.messages.form import role_of as validate_role
from ctxmw.strategies import _fold
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.types import StrategyContext
from tests._incremental import CallCounter
from tests.transcripts import adjacent_calls

FOLDING = Settings(context_window=4_000, compact_keep_recent=4, summary_step=20)


def test_compact_between_steps_reads_only_the_new_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    roles = CallCounter(monkeypatch, _fold, "role_of")
    texts = CallCounter(monkeypatch, _fold, "message_text")
    counted: list[int] = []
    original = _fold.count_messages
    monkeypatch.setattr(
        _fold, "count_messages", lambda c, m, ms: counted.append(len(ms)) or original(c, m, ms)
    )
    memo: dict[str, Any] = {}
    history = adjacent_calls(600)  # over 1,024 messages: the counts' pruning has run
    visits = []
    last_folded = -1
    for k in range(4):
        history = [*history, {"role": "user", "content": f"next {k}"}]
        before = (roles.n, texts.n, len(counted))
        ctx = StrategyContext(settings=FOLDING, memo=memo)
        out = anyio.run(apply_strategies, history, resolve_strategies("compact", FOLDING), ctx)
        fresh_ctx = StrategyContext(settings=FOLDING, memo={})
        with monkeypatch.context() as quiet:  # the fresh run is not counted
            quiet.setattr(_fold, "role_of", validate_role)
            quiet.setattr(_fold, "message_text", validate_text)
            quiet.setattr(_fold, "count_messages", original)
            fresh = anyio.run(
                apply_strategies, history, resolve_strategies("compact", FOLDING), fresh_ctx
            )
        assert out == fresh
        assert ctx.stats == fresh_ctx.stats
        assert ctx.stats["compact"]["folded"] > 1000
        folded = ctx.stats["compact"]["folded"]
        visits.append((roles.n - before[0], texts.n - before[1], sum(counted[before[2] :])))
        if last_folded >= 0:
            # A new user message: its role (and the head's), its tokens and the summary's, and
            # while the fold has not stepped, no folded text read again.
            roles_read, texts_read, tokens_counted = visits[-1]
            assert roles_read <= 8, visits
            assert tokens_counted <= 4, visits
            assert texts_read == 0 or folded != last_folded, visits
        last_folded = folded
    assert visits[0][1] > 1000
    assert [t for _, t, _ in visits[1:]].count(0) >= 2  # the steps are 20 messages apart


@pytest.mark.parametrize("change", ["edit", "drop", "remove"])
def test_compact_after_a_change_in_the_folded_range_is_as_afresh(change: str) -> None:
    memo: dict[str, Any] = {}
    history = adjacent_calls(80)
    history = [*history, {"role": "user", "content": "next"}]
    chain = resolve_strategies("compact", FOLDING)
    anyio.run(apply_strategies, history, chain, StrategyContext(settings=FOLDING, memo=memo))
    if change == "edit":  # a durable line appears in a folded message
        history = [*history[:9], {**history[9], "content": "DECISION: use v2"}, *history[10:]]
    elif change == "drop":
        history = history[:-30]
    else:
        history = [*history[:5], *history[7:]]
    warm_ctx = StrategyContext(settings=FOLDING, memo=memo)
    warm = anyio.run(apply_strategies, history, chain, warm_ctx)
    fresh_ctx = StrategyContext(settings=FOLDING, memo={})
    assert warm == anyio.run(apply_strategies, history, chain, fresh_ctx)
    assert warm_ctx.stats == fresh_ctx.stats
    if change == "edit":
        assert "DECISION: use v2" in warm[2]["content"]
