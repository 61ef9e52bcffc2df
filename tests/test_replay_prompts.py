"""``replay.prompts`` builds, at every call point, the prompt a ``Session`` sends for that history.

For every registered strategy (and the default list), over generated transcripts: a ``Session``
driven through ``FakeCompletion`` (the recorded assistant messages as its answers, one stateless
call per call point) sends exactly the prompts ``ctxmw.replay.prompts`` yields, in order. So what
``ctxmw replay`` measures (cost, loss) is what a session of that conversation would have sent.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxmw import Session, list_strategies
from ctxmw.replay import call_points, prompts
from ctxmw.strategies._summary_prompts import ALIGNED_MARK, SUMMARY_PROMPT
from ctxmw.strategies.summarize import clear_cache
from ctxmw.testing import FakeCompletion, text, tool_calls
from ctxmw.types import Messages
from tests.transcripts import SMALL_WINDOWS, transcripts

MODEL = "anthropic/claude-sonnet-4-5"
QUIET = {**SMALL_WINDOWS, "context_window": 10**9, "telemetry": False}
"""Small tiers, so a few dozen calls cross many boundaries."""
FOLDING = {
    **QUIET,
    "context_window": 3000,
    "output_reservation": 0,
    "compact_keep_recent": 2,
    "summary_step": 2,
    "compact_on_loss": "fallback",
    "offload_threshold": 20,
    "offload_preview_chars": 50,
}
"""A small window: compact and summarize fold, offload previews most results."""
CHAINS = [info.name for info in list_strategies()] + ["default", "offload,shorten_tools_economic"]
# The tools the transcripts call, declared as dicts: the session returns their calls to the
# caller instead of running them (it would, with offload's Python tool ctxmw_expand beside them).
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("read", "grep")
]
PROFILE = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Model:
    """Answers summary requests with a fixed summary, every other call with the next answer."""

    def __init__(self, answers: list[Any]) -> None:
        self.agent = FakeCompletion(*answers)
        self.summaries = 0

    async def __call__(self, **kwargs: Any) -> Any:
        last = str((kwargs.get("messages") or [{}])[-1].get("content"))
        if ALIGNED_MARK in last or SUMMARY_PROMPT[:40] in last:
            self.summaries += 1
            return text("Summary: the agent read files and ran greps.")
        return await self.agent(**kwargs)


def answer(message: dict[str, Any]) -> Any:
    calls = message.get("tool_calls")
    content = message.get("content")
    return tool_calls(*calls, content=content) if calls else text(str(content or ""))


async def session_prompts(messages: Messages, chain: str, config: dict[str, Any]) -> list[Any]:
    points = call_points(messages)
    model = Model([answer(messages[p]) for p in points])
    session = Session(
        MODEL,
        prompt_strategies=None if chain == "default" else chain,
        settings=config,
        completion=model,
        tools=TOOLS,
    )
    for p in points:
        await session.complete(messages[:p])
    await session.aclose()
    return model.agent.prompts


async def replayed(messages: Messages, chain: str, config: dict[str, Any]) -> list[Any]:
    model = Model([])
    return [
        prompt
        async for _, prompt in prompts(
            messages, chain, model=MODEL, settings=config, completion=model
        )
    ]


@pytest.mark.parametrize("chain", CHAINS)
@pytest.mark.parametrize("config", [QUIET, FOLDING], ids=["quiet", "folding"])
@PROFILE
@given(messages=transcripts(max_turns=24), seed=st.integers(0, 3))
def test_replay_prompts_are_what_a_session_sends(
    chain: str, config: dict[str, Any], messages: Messages, seed: int
) -> None:
    config = {**config, "epoch_size": 3 + seed}
    clear_cache()
    sent = anyio.run(session_prompts, messages, chain, config)
    clear_cache()
    built = anyio.run(replayed, messages, chain, config)
    assert len(built) == len(sent) == len(call_points(messages))
    for n, (ours, theirs) in enumerate(zip(built, sent, strict=True)):
        assert ours == theirs, f"call {n + 1} of {len(sent)} differs"


def test_prompts_yield_the_index_of_each_recorded_answer() -> None:
    messages: Messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "bye"},
        {"role": "assistant", "content": "bye"},
    ]

    async def collect() -> list[tuple[int, Messages]]:
        return [item async for item in prompts(messages, "none")]

    got = anyio.run(collect)
    assert [(i, len(p)) for i, p in got] == [(1, 1), (3, 3)]
    assert got[1][1] == messages[:3]
