"""Caches derived from a transcript live with its session: nothing stays once it is dropped."""

from __future__ import annotations

import gc
import json
import tracemalloc
from typing import Any

import pytest

import ctxmw
from ctxmw.messages._memo import BoundedCache, memoised, session_memo
from ctxmw.testing import FakeCompletion, text

STRATEGIES = ("shorten_tools_epoch_increment", "clear_tool_results", "compact")


def transcript(calls: int, tag: str) -> list[dict[str, Any]]:
    """Tool rounds whose arguments and results are all unique (about 4 KB a round)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    for i in range(calls):
        args = json.dumps({"path": f"{tag}/{i}.py", "pattern": f"{tag} {i} " * 40})
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": args}}
        body = "".join(f"{tag}:{i}:{line}: value {i * line}\n" for line in range(150))
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": body})
    return messages


async def _prepare(messages: list[dict[str, Any]]) -> None:
    for strategy in STRATEGIES:
        await ctxmw.prepare_prompt(messages, strategy, model="gpt-4o")


@pytest.mark.anyio
async def test_nothing_derived_from_a_transcript_outlives_the_call() -> None:
    await _prepare(transcript(40, "warm"))  # imports, the tokenizer, litellm's tables
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        messages = transcript(300, "big")
        size = sum(len(json.dumps(m)) for m in messages)
        await _prepare(messages)
        del messages
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # Before: token counts keyed by message JSON and shortened results keyed by their text
    # stayed in process-wide caches, several times the transcript's size.
    assert kept < 0.1 * size, f"{kept} bytes still allocated for a {size}-byte transcript"


@pytest.mark.anyio
async def test_a_session_keeps_its_caches_in_its_own_memo() -> None:
    session = ctxmw.Session(
        "gpt-4o",
        prompt_strategies=",".join(STRATEGIES),
        completion=FakeCompletion(text("one"), text("two")),
    )
    await session.ask("first")
    await session.ask("second")
    slots = [key for key in session._memo if key.startswith("memo:")]
    assert "memo:ctxmw.context.tokens.count_messages" in slots
    assert all(isinstance(session._memo[key], BoundedCache) for key in slots)


def test_a_cache_is_bounded_by_bytes_oldest_first() -> None:
    cache = BoundedCache(max_bytes=400)
    for i in range(10):
        cache.put(f"k{i}", "v" * 50)
    assert cache.bytes <= 400
    assert cache.get("k9") is not None
    assert cache.get("k0") is None
    cache.put("huge", "x" * 1000)  # larger than the whole bound: not kept
    assert cache.get("huge") is None
    assert cache.bytes <= 400


def test_memoised_caches_only_inside_a_session() -> None:
    calls: list[str] = []

    @memoised()
    def upper(value: str) -> str:
        calls.append(value)
        return value.upper()

    upper("a")
    upper("a")
    assert calls == ["a", "a"]
    with session_memo({}) as memo:
        upper("b")
        upper("b")
    assert calls == ["a", "a", "b"]
    assert any(key.endswith("upper") for key in memo)


@pytest.mark.anyio
async def test_finished_stateless_conversations_do_not_pin_their_transcripts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ctxmw.runtime import wrapper
    from ctxmw.runtime.conversations import Conversations

    # 20,000 tokens' worth of bytes (the registry counts a held token as four bytes).
    monkeypatch.setattr(wrapper, "_conversations", Conversations(max_bytes=4 * 20_000))
    messages = transcript(20, "stateless")  # about 20,000 tokens: one conversation's worth
    for i in range(4):
        await ctxmw.acompletion(
            model="gpt-4o",
            messages=[*messages, {"role": "user", "content": f"question {i}"}],
            prompt_strategies="none",
            session=f"conversation-{i}",
            completion=FakeCompletion(text("done")),
        )
    held = [c.recorder.held_tokens for c in wrapper._conversations.values() if c.recorder]
    # Only the newest conversations stay, within the bound (the current one always does).
    assert len(held) < 4
    assert sum(held[:-1]) <= 20_000
