"""The ``compact`` strategy (tests/test_compact.py covers the ``_compact`` string helpers)."""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings

from ctxmw import CompactionLossError, Settings, StrategyError, budget, prepare_prompt, validate
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
