"""``ctxmw.acompletion`` with offload: where the originals live between stateless calls."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import ctxmw
from ctxmw.context.readback import READBACK_TOOL_NAME
from ctxmw.runtime import wrapper
from ctxmw.runtime.conversations import Conversations
from ctxmw.strategies import offload as offload_strategy
from ctxmw.testing import FakeCompletion, text, tool_calls
from ctxmw.types import Messages

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"
SETTINGS = {"offload_threshold": 500}


def history(n: int, size: int = 100_000) -> Messages:
    """A conversation whose one tool result is ``size`` characters, distinct per ``n``."""
    log = "".join(f"{n}:{i:06d} ok\n" for i in range(size // 12))
    call = {"id": f"c{n}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    return [
        {"role": "user", "content": "Read the log."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": log},
    ]


async def call(messages: Messages, *replies: Any, **options: Any) -> FakeCompletion:
    fake = FakeCompletion(*(replies or (text("ok"),)))
    await ctxmw.acompletion(
        MODEL,
        messages,
        prompt_strategies="offload",
        settings=SETTINGS,
        completion=fake,
        **options,
    )
    return fake


def handle_in(content: str) -> str:
    return content.split("[ctxmw offload ", 1)[1][:16]


async def test_offloaded_originals_count_in_the_registrys_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = Conversations(max_bytes=250_000)  # two conversations' originals
    monkeypatch.setattr(wrapper, "_conversations", registry)
    for n in range(6):
        fake = await call(history(n), session=f"conversation-{n}")
        assert fake.prompts[0][-1]["content"].startswith("[ctxmw offload ")
    held = [entry.held_bytes for entry in registry.values()]
    assert held[-1] >= 100_000  # the newest conversation's original is counted
    assert len(registry) < 6
    assert sum(held) <= 250_000 + held[-1]  # within the bound (the current one always stays)


async def test_a_later_call_of_a_conversation_reads_an_earlier_original_back() -> None:
    messages = history(1)  # the caller's own list, grown between calls as agents do
    first = await call(messages, session="reader")
    handle = handle_in(first.prompts[0][-1]["content"])
    later = [
        *messages,
        {"role": "assistant", "content": "read it"},
        {"role": "user", "content": "What is at offset 24?"},
    ]
    expand = tool_calls((READBACK_TOOL_NAME, {"handle": handle, "offset": 24, "limit": 12}))
    second = await call(later, expand, text("found"), session="reader")
    answer = second.prompts[1][-1]
    assert answer["role"] == "tool"
    assert answer["content"].endswith("\n" + history(1)[2]["content"][24:36])


async def test_without_a_save_file_or_session_results_go_unchanged_with_one_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(offload_strategy, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        fakes = [await call(history(n)) for n in range(2)]
    for n, fake in enumerate(fakes):
        assert fake.prompts[0][-1]["content"] == history(n)[2]["content"]
        names = [t["function"]["name"] for t in fake.calls[0].get("tools") or []]
        assert READBACK_TOOL_NAME not in names
    assert caplog.text.count("offload is off") == 1
