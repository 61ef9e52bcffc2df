"""Warm calls of the non-epoch strategies do the work of their new messages only.

A conversation's memo kept across calls: ``repair_tool_pairs`` re-checks pairing from the last
clean point before the first changed message, ``shorten_tools`` stops its newest-first budget
walk once every older call is dropped anyway, and the renderer keeps groups whole looking only
at the groups that can straddle a drop edge.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import anyio
import pytest

from ctxmw import Settings
from ctxmw.context.survival import message_text as validate_text
from ctxmw.messages import pairs, validate
from ctxmw.messages.form import role_of as validate_role
from ctxmw.strategies import _chain_input, _fold, _tiers, shorten_tools
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.types import Messages, StrategyContext
from tests._incremental import CallCounter, growing_rounds
from tests.transcripts import adjacent_calls, call, group

TIGHT = Settings(
    full_tool_outputs=2,
    max_tool_calls=4,
    max_tool_chars=2_000,
    short_output_length=60,
    short_string_length=30,
)


def _run(messages: Messages, chain: str, memo: dict[str, Any]) -> tuple[Messages, dict[str, Any]]:
    ctx = StrategyContext(settings=TIGHT, memo=memo)
    out = anyio.run(apply_strategies, messages, resolve_strategies(chain, TIGHT), ctx)
    return out, ctx.stats


def test_repair_tool_pairs_rechecks_only_the_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    turns = CallCounter(monkeypatch, validate, "_close_turn")
    memo: dict[str, Any] = {}
    visits = []
    for history in growing_rounds(200, 4):
        before = turns.n
        out, _ = _run(history, "repair_tool_pairs", memo)
        assert out == history  # nothing dropped
        visits.append(turns.n - before)
    assert visits[0] > 200  # the first call reads everything
    # Then the new round, the previous round (its group was still open), and the end.
    assert max(visits[1:]) <= 4


def test_repair_tool_pairs_warm_finds_a_new_problem_as_afresh() -> None:
    memo: dict[str, Any] = {}
    history = adjacent_calls(30)
    _run(history, "repair_tool_pairs", memo)
    broken = [*history, {"role": "tool", "tool_call_id": "call_3", "content": "late"}]
    warm, warm_stats = _run(broken, "repair_tool_pairs", memo)
    fresh, fresh_stats = _run(broken, "repair_tool_pairs", {})
    assert warm == fresh == history
    assert warm_stats == fresh_stats
    assert warm_stats["repair_tool_pairs"] == {"problems": 1, "dropped": 1}


def test_repair_tool_pairs_an_edit_rechecks_from_there() -> None:
    memo: dict[str, Any] = {}
    history = adjacent_calls(30)
    _run(history, "repair_tool_pairs", memo)
    # The 10th call's result now answers an id its group does not hold.
    edited = [*history[:21], {**history[21], "tool_call_id": "nope"}, *history[22:]]
    assert _run(edited, "repair_tool_pairs", memo) == _run(edited, "repair_tool_pairs", {})
    assert _run(history, "repair_tool_pairs", memo) == _run(history, "repair_tool_pairs", {})


def test_shorten_tools_budget_walk_stops_at_the_dropped_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tiers = CallCounter(monkeypatch, shorten_tools, "_tier")
    memo: dict[str, Any] = {}
    for history in growing_rounds(300, 3):
        before = tiers.n
        out, stats = _run(history, "shorten_tools", memo)
        assert stats["shorten_tools"]["calls_dropped"] > 290
        # Two tiers per call walked: the kept ones and the first dropped, not the 300 older.
        assert tiers.n - before <= 2 * 8
    assert out == _run(history, "shorten_tools", {})[0]


def test_the_pairing_pass_looks_only_at_groups_by_the_drop_edge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    looked = CallCounter(monkeypatch, _tiers, "_keep_whole")
    history = adjacent_calls(300)
    history += group([call("a", "read", path="a"), call("b", "read", path="b")], ["x", "y"])
    _run(history, "shorten_tools", {})
    assert 1 <= looked.n <= 3


class _Mapping(Mapping[str, Any]):
    """A caller's message type that is not a dict but compares equal to one."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def test_the_first_strategy_keeps_one_copy_of_the_input() -> None:
    memo: dict[str, Any] = {}
    for history in growing_rounds(60, 3):
        _run(history, "shorten_tools_epoch", memo)
    index_inputs = memo["tool_index:shorten_tools_epoch"][0]
    assert memo["render:shorten_tools_epoch"].inputs is index_inputs
    assert index_inputs == history
    assert index_inputs is not history


def test_a_warm_call_checks_the_types_of_the_new_messages_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked: list[int] = []
    original = _chain_input._mixed
    monkeypatch.setattr(_chain_input, "_mixed", lambda ms: checked.append(len(ms)) or original(ms))
    memo: dict[str, Any] = {}
    for history in growing_rounds(100, 3):
        _run(history, "shorten_tools_epoch", memo)
    assert checked[0] > 200
    assert checked[1:] == [2, 2]


def test_non_dict_messages_are_converted_as_afresh_with_a_kept_memo() -> None:
    memo: dict[str, Any] = {}
    history: list[Any] = list(adjacent_calls(20))
    history[5] = _Mapping(dict(history[5]))
    for k in range(4):
        extra = group([call(f"m{k}", "read", path=f"m{k}")], [f"out {k}" * 40])
        # Some rounds come as mappings, some as dicts; the head is sent again as it was.
        history = [*history, *(map(_Mapping, extra) if k % 2 else extra)]
        warm, _ = _run(history, "shorten_tools_epoch", memo)
        fresh, _ = _run(history, "shorten_tools_epoch", {})
        assert warm == fresh
        assert all(type(m) is dict for m in warm)
    rebuilt = [dict(m) if isinstance(m, dict) else _Mapping(dict(m)) for m in history]
    out, _ = _run(rebuilt, "shorten_tools_epoch", memo)
    assert out == fresh
    # Equal dicts rebuilt by the caller: the prompt shows this call's objects.
    assert out[0] is rebuilt[0]
    assert out[-4] is rebuilt[-4]  # the last dict round (the last one came as mappings)


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
        _run(history, "repair_tool_pairs,shorten_tools_epoch", memo)
    clean = memo["repair_tool_pairs:clean"]
    assert memo["tool_index:shorten_tools_epoch"][0] is clean
    assert memo["render:shorten_tools_epoch"].inputs is clean


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
