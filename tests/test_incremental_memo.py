"""The incremental core: a call with a kept memo does the work of its new messages only, keeps
its memo bounded, and leaves no cyclic garbage behind."""

from __future__ import annotations

import gc
from typing import Any

import anyio
import pytest

from ctxmw import Settings
from ctxmw.history import _history as history_module
from ctxmw.history import _kept, common_prefix, resume_point, same_prefix
from ctxmw.messages import pairs
from ctxmw.strategies import _regions, cache_breakpoints, shorten_tools_economic
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.telemetry import marks
from ctxmw.types import Messages, StrategyContext
from tests._incremental import CallCounter, growing_rounds
from tests.transcripts import adjacent_calls, call, group

SMALL = Settings(
    epoch_tool_call_threshold=4,
    epoch_size=3,
    epoch_full_tool_calls=2,
    epoch_compacted_tool_calls=3,
    economic_full_tool_calls=2,
    economic_compacted_tool_calls=3,
    short_output_length=60,
    economic_compacted_result_chars=60,
    short_string_length=30,
)
SONNET = "anthropic/claude-sonnet-4-5"


def _run(messages: Messages, chain: str, memo: dict[str, Any], model: str | None = None) -> Any:
    ctx = StrategyContext(settings=SMALL, model=model, memo=memo)
    return anyio.run(apply_strategies, messages, resolve_strategies(chain, SMALL), ctx)


def test_common_prefix_by_identity_then_equality() -> None:
    a = [{"k": i} for i in range(50)]
    b = [*a[:20], *[dict(m) for m in a[20:]]]
    assert common_prefix(a, b) == 50
    assert same_prefix(a, b, 50) == 20
    c = [*a[:33], {"k": "edited"}, *a[34:]]
    assert common_prefix(a, c) == 33
    assert common_prefix(a, a[:10]) == 10
    assert common_prefix([], a) == 0


def test_resume_point_steps_back_to_an_open_group() -> None:
    msgs = [{"role": "user", "content": "go"}, *group([call("a"), call("b")], ["x", "y"])]
    assert resume_point(msgs, 3) == 1  # the group's second result may still come
    assert resume_point(msgs, 4) == 1
    assert resume_point(msgs, 1) == 1
    assert resume_point([*msgs, {"role": "user", "content": "next"}], 5) == 5


@pytest.mark.parametrize(
    "chain", ["shorten_tools_economic", "shorten_tools_epoch", "shorten_tools_epoch_increment"]
)
def test_an_appended_round_renders_only_the_new_messages(
    monkeypatch: pytest.MonkeyPatch, chain: str
) -> None:
    rendered = CallCounter(monkeypatch, _regions, "_render_one")
    memo: dict[str, Any] = {}
    sizes = []
    for history in growing_rounds(40, 6):
        before = rendered.n
        _run(history, chain, memo)
        sizes.append(rendered.n - before)
    # The first call renders everything; each later one its round, plus the messages whose
    # tier changed (an epoch or a move); never the whole history again on most calls.
    assert sizes[0] >= 80
    assert sorted(sizes[1:])[len(sizes[1:]) // 2] <= 10


def test_an_appended_round_indexes_only_the_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = CallCounter(monkeypatch, pairs, "_close_call")
    memo: dict[str, Any] = {}
    for history in growing_rounds(40, 4):
        before = closed.n
        _run(history, "shorten_tools_epoch", memo)
    # The new result, and the previous group's (the history ended inside that group: another
    # of its results could have come next, so it is read again).
    assert closed.n - before == 2


def test_an_edited_middle_message_indexes_from_there(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = CallCounter(monkeypatch, pairs, "_close_call")
    memo: dict[str, Any] = {}
    history = adjacent_calls(30)
    _run(history, "shorten_tools_epoch", memo)
    edited = [*history[:40], {**history[40], "content": "changed"}, *history[41:]]
    before = closed.n
    _run(edited, "shorten_tools_epoch", memo)
    assert closed.n - before == len([m for m in history[39:] if m["role"] == "tool"])


def test_the_economic_fold_decides_only_the_new_call_points(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps = CallCounter(monkeypatch, shorten_tools_economic, "_step")
    memo: dict[str, Any] = {}
    for history in growing_rounds(40, 4):
        before = steps.n
        _run(history, "shorten_tools_economic", memo)
    assert steps.n - before == 2  # the new round's assistant message and the call itself


def test_cache_breakpoints_reads_only_the_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    counted = CallCounter(monkeypatch, cache_breakpoints, "count_marks")
    assert cache_breakpoints.count_marks is not marks.count_marks
    memo: dict[str, Any] = {}
    for history in growing_rounds(10, 4):
        before = counted.n
        _run(history, "cache_breakpoints", memo, model=SONNET)
    # The new round, and the previous last message, which this strategy marked last time.
    assert counted.n - before <= 3


def test_the_memo_holds_one_entry_per_strategy_whatever_the_calls() -> None:
    memo: dict[str, Any] = {}
    lengths = []
    for history in growing_rounds(40, 12):
        _run(history, "shorten_tools_economic,cache_breakpoints", memo, model=SONNET)
        lengths.append(len(memo))
    assert len(set(lengths[1:])) == 1


def test_inputs_over_the_bound_are_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (_kept, _regions, history_module):
        monkeypatch.setattr(module, "MAX_MEMO_MESSAGES", 50)
    memo: dict[str, Any] = {}
    history = adjacent_calls(40)
    fresh = _run(history, "shorten_tools_epoch", {})
    assert _run(history, "shorten_tools_epoch", memo) == fresh
    assert not [key for key in memo if key.startswith(("tool_index:", "render:"))]


def test_calls_with_a_kept_memo_leave_no_cyclic_garbage() -> None:
    chain = "shorten_tools_economic,shorten_tools_epoch_increment,cache_breakpoints,inbox"
    memo: dict[str, Any] = {}
    histories = list(growing_rounds(60, 8))
    _run(histories[0], chain, memo, model=SONNET)  # imports and first-use caches
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for history in histories[1:]:
            _run(history, chain, memo, model=SONNET)
        gc.collect()
        found = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert found == []
