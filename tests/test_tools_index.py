"""The tool index, and its per-session memo: reading only new messages changes nothing."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmw import Settings
from ctxmw.messages.pairs import index_tools
from ctxmw.strategies.shorten_tools import shorten_tools
from ctxmw.strategies.shorten_tools_epoch import shorten_tools_epoch
from ctxmw.strategies.shorten_tools_epoch_increment import shorten_tools_epoch_increment
from ctxmw.types import Messages, StrategyContext
from tests.test_properties import SMALL
from tests.transcripts import adjacent_calls, call_points, transcripts

STRATEGIES = [shorten_tools, shorten_tools_epoch, shorten_tools_epoch_increment]


def _dump(messages: Messages) -> list[str]:
    return [json.dumps(m, sort_keys=True) for m in messages]


def test_a_grown_transcript_extends_the_memo_instead_of_rereading() -> None:
    msgs = adjacent_calls(60)
    memo: dict[str, Any] = {}
    index_tools(msgs[:40], memo, "x")
    indexer = memo["tool_index:x"].state
    grown = index_tools(msgs, memo, "x")
    assert memo["tool_index:x"].state is indexer
    assert grown == index_tools(msgs)


def test_a_diverged_transcript_is_read_again() -> None:
    msgs = adjacent_calls(30)
    memo: dict[str, Any] = {}
    index_tools(msgs, memo, "x")
    edited = [*msgs[:10], {"role": "user", "content": "edited"}, *msgs[11:]]
    assert index_tools(edited, memo, "x") == index_tools(edited)
    assert index_tools(msgs[:20], memo, "x") == index_tools(msgs[:20])


@settings(max_examples=40, deadline=None)
@given(first=transcripts(max_turns=50), second=transcripts(max_turns=20), which=st.integers(0, 2))
def test_with_a_memo_every_prompt_is_the_one_computed_from_scratch(
    first: Messages, second: Messages, which: int
) -> None:
    strategy = STRATEGIES[which]
    s = Settings(**SMALL)
    memo: dict[str, Any] = {}
    # A session's calls, then a different conversation on the same memo, then back.
    sequence = [first[:p] for p in call_points(first)] + [second] + [first]
    for messages in sequence:
        fresh = strategy(messages, StrategyContext(settings=s))
        cached = strategy(messages, StrategyContext(settings=s, memo=memo))
        assert _dump(cached) == _dump(fresh)
