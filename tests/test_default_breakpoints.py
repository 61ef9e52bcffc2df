"""The default chain marks breakpoint-caching prompts itself: switching providers changes no
strategy (an Anthropic or Bedrock Claude session caches without a strategy list of its own)."""

from __future__ import annotations

from typing import Any

import pytest

from ctxmw import Session
from ctxmw.replay import replay, synthetic_transcript
from ctxmw.settings import DEFAULT_STRATEGIES, Settings
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.strategies._economics import economics
from ctxmw.strategies.shorten_tools_economic import NAME, _marks_head_later
from ctxmw.telemetry import ApproxCounter
from ctxmw.telemetry.marks import MAX_BREAKPOINTS, count_marks, injected_indices, is_marked
from ctxmw.testing import FakeCompletion, text
from ctxmw.types import StrategyContext
from tests._synthetic import session

CLAUDE = "anthropic/claude-sonnet-4-5-20250929"
SYSTEM_POINT = [{"location": "message", "role": "system"}]


def _marked(messages: list[Any]) -> list[int]:
    return [i for i, m in enumerate(messages) if is_marked(m)]


def test_the_default_chain_ends_with_cache_breakpoints_after_the_economic_strategy() -> None:
    assert DEFAULT_STRATEGIES[-1] == "cache_breakpoints"
    names = [name for name, _ in resolve_strategies(None, Settings())]
    assert names == list(DEFAULT_STRATEGIES)
    # So the economic schedule prices a breakpoint move as reading the marked head back.
    assert _marks_head_later(names)
    assert economics(CLAUDE, Settings(), head_mark=_marks_head_later(names)).head_read
    assert NAME in names


@pytest.mark.anyio
@pytest.mark.parametrize("model", [CLAUDE, "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0"])
async def test_a_claude_session_sends_marks_with_the_default_chain(model: str) -> None:
    transcript, points = session(60)
    fake = FakeCompletion(text("done"))
    chat = Session(model, completion=fake)
    await chat.run(transcript[: points[-1]])
    sent = fake.prompts[0]
    assert _marked(sent), "the default chain placed no cache_control mark"
    assert is_marked(sent[-1])  # the next call extends this prompt
    assert sum(map(count_marks, sent)) <= MAX_BREAKPOINTS


@pytest.mark.anyio
async def test_an_openai_session_sends_no_marks_with_the_default_chain() -> None:
    transcript, points = session(60)
    fake = FakeCompletion(text("done"))
    await Session("openai/gpt-4o", completion=fake).run(transcript[: points[-1]])
    assert not _marked(fake.prompts[0])


@pytest.mark.anyio
async def test_the_calls_injection_points_count_against_the_limit() -> None:
    """litellm adds the marks of ``cache_control_injection_points`` after the strategies: the
    call's own points leave room for them (four at most reach the provider)."""
    transcript, points = session(120)
    fake = FakeCompletion(text("done"))
    chat = Session(CLAUDE, completion=fake, cache_control_injection_points=SYSTEM_POINT)
    await chat.run(transcript[: points[-1]])
    call = fake.calls[0]
    assert call["cache_control_injection_points"] == SYSTEM_POINT
    sent = call["messages"]
    injected = injected_indices(sent, SYSTEM_POINT)
    own = sum(map(count_marks, sent))
    assert injected
    assert not set(_marked(sent)) & injected
    assert own + len(injected) <= MAX_BREAKPOINTS


@pytest.mark.anyio
async def test_a_context_carries_the_injection_points_to_the_strategy() -> None:
    transcript, _ = session(120)
    plain = StrategyContext(Settings(), model=CLAUDE)
    pointed = StrategyContext(Settings(), model=CLAUDE, cache_control_injection_points=SYSTEM_POINT)
    chain = resolve_strategies("cache_breakpoints", plain.settings)
    without = await apply_strategies(transcript, chain, plain)
    with_points = await apply_strategies(transcript, chain, pointed)
    assert sum(map(count_marks, without)) == MAX_BREAKPOINTS
    assert sum(map(count_marks, with_points)) == MAX_BREAKPOINTS - 1


@pytest.mark.anyio
async def test_the_defaults_closing_marks_change_no_replay_figure() -> None:
    """Digests ignore ``cache_control`` marks: the default's closing ``cache_breakpoints``
    leaves the ``auto`` and ``end_breakpoint`` columns as without it, and the ``breakpoints``
    column marks the same messages as the replay's own marking step."""
    transcripts = {"s": synthetic_transcript(120, seed=3)}
    result = await replay(
        transcripts,
        ["default", "shorten_tools_economic,inbox"],
        model=CLAUDE,
        counter=ApproxCounter(),
        optimal=False,
    )
    default, without = (
        result.strategies["default"],
        result.strategies["shorten_tools_economic,inbox"],
    )
    assert default.cost == without.cost
    assert [c.splits for c in default.calls] == [c.splits for c in without.calls]
