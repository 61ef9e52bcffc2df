"""The ``compact`` strategy (tests/test_compact.py covers the ``_compact`` string helpers)."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings

from ctxmw import CompactionLossError, Settings, StrategyError, budget, prepare_prompt, validate
from ctxmw.strategies._chain import apply_strategies
from ctxmw.strategies.compact import Compact
from ctxmw.types import Messages, StrategyContext
from tests.transcripts import (
    DURABLE_LINES,
    call,
    call_points,
    durable_trace,
    group,
    quarter_counter,
    transcripts,
)

compact = Compact(counter=quarter_counter)


def ctx_for(messages: Messages, utilisation: float = 0.8, **overrides: Any) -> StrategyContext:
    """A context whose window puts ``messages`` at ``utilisation``."""
    total = budget(messages, counter=quarter_counter).total
    window = int(total / utilisation) + 4096
    return StrategyContext(settings=Settings(context_window=window, **overrides))


def test_below_the_trigger_nothing_changes() -> None:
    msgs = durable_trace()
    ctx = ctx_for(msgs, utilisation=0.7)
    assert compact(msgs, ctx) is msgs
    assert ctx.stats["compact"]["band"] == "compress"


def test_forty_messages_with_six_durable_lines_compact_under_budget_all_surviving() -> None:
    msgs = durable_trace()
    assert len(msgs) == 40
    ctx = ctx_for(msgs)
    out = compact(msgs, ctx)
    validate(out)
    window = ctx.settings.context_window
    after = budget(out, counter=quarter_counter, context_window=window)
    assert after.utilisation < ctx.settings.compact_trigger
    summary = out[2]["content"]
    assert summary.startswith("[Summary of 20 earlier messages")
    assert all(line in summary.splitlines() for line in DURABLE_LINES)
    assert out[:2] == msgs[:2]
    assert all(a is b for a, b in zip(out[3:], msgs[22:], strict=True))
    assert ctx.stats["compact"]["folded"] == 20


def test_a_tool_group_is_never_split() -> None:
    msgs: Messages = [{"role": "user", "content": "go"}]
    for k in range(12):  # parallel groups: one assistant message, three results
        calls = [call(f"c{k}_{j}", "read", j=j) for j in range(3)]
        msgs += group(calls, ["r" * 200] * 3)
    out = compact(msgs, ctx_for(msgs, compact_keep_recent=2, summary_step=3))
    validate(out)
    assert out[2]["role"] == "assistant"
    assert len(out[2]["tool_calls"]) == 3


def test_a_lost_durable_item_refuses_with_a_typed_error() -> None:
    msgs = durable_trace()
    spanning = [r"carrier API\ntimed out", *Settings().resolved_durable_patterns]
    msgs[4] = {**msgs[4], "content": "carrier API\ntimed out"}
    ctx = ctx_for(msgs, durable_patterns=spanning, compact_on_loss="raise")
    with pytest.raises(CompactionLossError, match="1 durable item") as info:
        compact(msgs, ctx)
    assert info.value.missing == ["carrier API\ntimed out"]
    assert "carrier API" not in str(info.value)  # content stays out of error texts (and logs)
    with pytest.raises(StrategyError) as wrapped:
        anyio.run(lambda: prepare_prompt(msgs, [compact], settings=ctx.settings))
    assert isinstance(wrapped.value.__cause__, CompactionLossError)
    assert isinstance(wrapped.value, CompactionLossError)  # `except CompactionLossError` fires
    assert wrapped.value.missing == ["carrier API\ntimed out"]


def test_a_lost_durable_item_falls_back_to_the_full_prompt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    msgs = durable_trace()
    msgs[4] = {**msgs[4], "content": "BEGIN\nEND"}
    ctx = ctx_for(msgs, durable_patterns=["BEGIN\nEND"], compact_on_loss="fallback")
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        assert compact(msgs, ctx) is msgs
    assert "1 durable item(s) would have been lost" in caplog.text
    assert "BEGIN" not in caplog.text


def test_the_prefix_is_byte_stable_within_a_step() -> None:
    msgs = durable_trace()
    ctx = ctx_for(msgs[:38])
    first = compact(msgs[:38], ctx)
    second = compact(msgs, StrategyContext(settings=ctx.settings))
    assert first[2]["content"].startswith("[Summary of 20")
    dumped = [json.dumps(m, sort_keys=True) for m in second]
    assert dumped[: len(first)] == [json.dumps(m, sort_keys=True) for m in first]


def test_registered_under_its_name() -> None:
    msgs = durable_trace()
    out = anyio.run(lambda: prepare_prompt(msgs, "compact", settings={"context_window": 2_000}))
    assert out[2]["content"].startswith("[Summary of")


SMALL = Settings(context_window=4_200, compact_keep_recent=2, summary_step=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=transcripts())
def test_valid_in_valid_out_untouched_deterministic(messages: Messages) -> None:
    before = copy.deepcopy(messages)
    for point in call_points(messages)[-3:]:
        prefix = messages[:point]
        out = compact(prefix, StrategyContext(settings=SMALL))
        validate(out)
        assert compact(prefix, StrategyContext(settings=SMALL)) == out
    assert messages == before


class CountingCounter:
    """A TokenCounter (a quarter of the JSON characters a message) counting what it counts."""

    def __init__(self) -> None:
        self.messages = 0

    def message_tokens(self, model: str, message: Mapping[str, Any]) -> int:
        self.messages += 1
        return 3 + len(json.dumps(message)) // 4

    def tools_tokens(self, model: str, tools: Sequence[Mapping[str, Any]], has_system: bool) -> int:
        return 0

    def overhead_tokens(self, model: str) -> int:
        return 3


@pytest.mark.parametrize("n", [16_500, 70_000])
def test_a_long_session_counts_only_its_new_messages(n: int) -> None:
    """Past any cache bound (16,384 entries once, 16 MB now), only new messages are counted."""
    counter = CountingCounter()
    chain = [("compact", Compact(counter=counter))]
    msgs: Messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
    msgs += [{"role": "user" if i % 2 else "assistant", "content": f"m{i}"} for i in range(n)]
    memo: dict[str, Any] = {}  # the session's memo, as a Session passes it on every call
    settings = Settings(context_window=10**9)  # measured on every call, never folded

    def call() -> None:
        ctx = StrategyContext(settings=settings, memo=memo)
        anyio.run(apply_strategies, msgs, chain, ctx)

    call()
    assert counter.messages == len(msgs)
    counter.messages = 0
    msgs.append({"role": "user", "content": "one more"})
    call()
    assert counter.messages == 1


def native_block_trace(pairs: int) -> Messages:
    """Head, then Anthropic-native tool_use / tool_result message pairs."""
    msgs: Messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
    for k in range(pairs):
        use = {"type": "tool_use", "id": f"u{k}", "name": "read", "input": {"k": k}}
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": "r"}, use]})
        result = {"type": "tool_result", "tool_use_id": f"u{k}", "content": "x" * 300}
        msgs.append({"role": "user", "content": [result]})
    return msgs


def _blocks(message: Any, kind: str, key: str) -> list[Any]:
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return [b.get(key) for b in blocks if isinstance(b, dict) and b.get("type") == kind]


def split_native_pairs(messages: Messages) -> list[int]:
    """Indices of user messages whose tool_result blocks do not answer the message before."""
    return [
        i
        for i, msg in enumerate(messages)
        if any(
            use_id not in (_blocks(messages[i - 1], "tool_use", "id") if i else [])
            for use_id in _blocks(msg, "tool_result", "tool_use_id")
        )
    ]


@pytest.mark.parametrize("keep", [2, 3, 4])
@pytest.mark.parametrize("step", [1, 2, 3])
def test_a_native_tool_use_is_never_folded_apart_from_its_result(keep: int, step: int) -> None:
    msgs = native_block_trace(20)
    ctx = ctx_for(msgs, compact_keep_recent=keep, summary_step=step)
    out = compact(msgs, ctx)
    assert ctx.stats["compact"]["folded"] > 0
    assert split_native_pairs(out) == []
    validate(out)


def test_the_current_turns_instruction_is_never_folded() -> None:
    msgs: Messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Turn 1: read the source modules."},
    ]
    for n in range(3):
        msgs += group([call(f"a{n}", "read", path=f"src/m{n}.py")], ["x" * 400])
    msgs.append({"role": "assistant", "content": "Read them."})
    instruction = {"role": "user", "content": "Turn 2: now read the test modules too."}
    msgs.append(instruction)
    for n in range(6):
        msgs += group([call(f"b{n}", "read", path=f"tests/t{n}.py")], ["y" * 400])
    ctx = ctx_for(msgs, compact_keep_recent=2, summary_step=1)
    out = compact(msgs, ctx)
    assert ctx.stats["compact"]["folded"] > 0
    assert any(m is instruction for m in out)
    assert all("Turn 2" not in str(m.get("content")) for m in out if m is not instruction)


@settings(max_examples=60, deadline=None)
@given(messages=transcripts(max_turns=30))
def test_the_last_user_message_is_never_folded(messages: Messages) -> None:
    from ctxmw.strategies._fold import plan_fold, splice

    fold = plan_fold(messages, Settings(compact_keep_recent=1, summary_step=1))
    last = [m for m in messages if m["role"] == "user"][-1]
    assert fold is None or any(m is last for m in splice(messages, fold, "summary"))
    assert fold is None or all(m is not last for m in fold.folded(messages))
