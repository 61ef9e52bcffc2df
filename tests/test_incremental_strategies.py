"""Warm calls of the non-epoch strategies do the work of their new messages only.

A conversation's memo kept across calls: ``repair_tool_pairs`` re-checks pairing from the last
clean point before the first changed message, ``shorten_tools`` stops its newest-first budget
walk once every older call is dropped anyway, and the renderer keeps groups whole looking only
at the groups that can straddle a drop edge.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ctxmw.messages import pairs, validate
from ctxmw.strategies import shorten_tools
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.types import Messages, StrategyContext
from tests._incremental import TIGHT, CallCounter, growing_rounds, run_chain
from tests.transcripts import adjacent_calls


def test_repair_tool_pairs_rechecks_only_the_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    turns = CallCounter(monkeypatch, validate, "_close_turn")
    memo: dict[str, Any] = {}
    visits = []
    for history in growing_rounds(200, 4):
        before = turns.n
        out, _ = run_chain(history, "repair_tool_pairs", memo)
        assert out == history  # nothing dropped
        visits.append(turns.n - before)
    assert visits[0] > 200  # the first call reads everything
    # Then the new round, the previous round (its group was still open), and the end.
    assert max(visits[1:]) <= 4


def test_repair_tool_pairs_warm_finds_a_new_problem_as_afresh() -> None:
    memo: dict[str, Any] = {}
    history = adjacent_calls(30)
    run_chain(history, "repair_tool_pairs", memo)
    broken = [*history, {"role": "tool", "tool_call_id": "call_3", "content": "late"}]
    warm, warm_stats = run_chain(broken, "repair_tool_pairs", memo)
    fresh, fresh_stats = run_chain(broken, "repair_tool_pairs", {})
    assert warm == fresh == history
    assert warm_stats == fresh_stats
    assert warm_stats["repair_tool_pairs"] == {"problems": 1, "dropped": 1}


def test_repair_tool_pairs_an_edit_rechecks_from_there() -> None:
    memo: dict[str, Any] = {}
    history = adjacent_calls(30)
    run_chain(history, "repair_tool_pairs", memo)
    # The 10th call's result now answers an id its group does not hold.
    edited = [*history[:21], {**history[21], "tool_call_id": "nope"}, *history[22:]]
    assert run_chain(edited, "repair_tool_pairs", memo) == run_chain(
        edited, "repair_tool_pairs", {}
    )
    assert run_chain(history, "repair_tool_pairs", memo) == run_chain(
        history, "repair_tool_pairs", {}
    )


def test_shorten_tools_budget_walk_stops_at_the_dropped_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tiers = CallCounter(monkeypatch, shorten_tools, "_tier")
    memo: dict[str, Any] = {}
    for history in growing_rounds(300, 3):
        before = tiers.n
        out, stats = run_chain(history, "shorten_tools", memo)
        assert stats["shorten_tools"]["calls_dropped"] > 290
        # Two tiers per call walked: the kept ones and the first dropped, not the 300 older.
        assert tiers.n - before <= 2 * 8
    assert out == run_chain(history, "shorten_tools", {})[0]


def test_the_first_strategy_keeps_one_copy_of_the_input() -> None:
    memo: dict[str, Any] = {}
    for history in growing_rounds(60, 3):
        run_chain(history, "shorten_tools_epoch", memo)
    index_inputs = memo["tool_index:shorten_tools_epoch"].inputs
    assert memo["render:shorten_tools_epoch"].inputs is index_inputs
    assert index_inputs == history
    assert index_inputs is not history


def test_a_callers_first_strategy_that_edits_its_input_gets_no_stale_resume() -> None:
    def edits(messages: Messages, ctx: StrategyContext) -> Messages:
        messages[-1] = {**messages[-1], "content": "replaced in place"}
        index = pairs.index_tools(messages, ctx.memo, "edits")
        ctx.stats["edits"] = [len(index.calls), index.last_user_index]
        return messages

    memo: dict[str, Any] = {}
    for history in growing_rounds(10, 3):
        ctx = StrategyContext(settings=TIGHT, memo=memo)
        chain = [("edits", edits), *resolve_strategies("shorten_tools_epoch", TIGHT)]
        warm = anyio.run(apply_strategies, history, chain, ctx)
        fresh_ctx = StrategyContext(settings=TIGHT, memo={})
        fresh = anyio.run(apply_strategies, history, chain, fresh_ctx)
        assert warm == fresh
        assert ctx.stats == fresh_ctx.stats


def test_a_strategy_that_passes_its_input_on_shares_it_with_the_next() -> None:
    memo: dict[str, Any] = {}
    for history in growing_rounds(60, 3):
        run_chain(history, "repair_tool_pairs,shorten_tools_epoch", memo)
    clean = memo["repair_tool_pairs:clean"].inputs
    assert memo["tool_index:shorten_tools_epoch"].inputs is clean
    assert memo["render:shorten_tools_epoch"].inputs is clean
