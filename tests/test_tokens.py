"""One token counter: the same prompt has the same total in budget(), the ledger and replay."""

from __future__ import annotations

from typing import Any

import litellm
import pytest

import ctxmw
from ctxmw.context.tokens import ApproxCounter, LiteLLMCounter, approx_tokens
from ctxmw.replay import replay
from ctxmw.telemetry import CallRecorder
from ctxmw.testing import text
from tests._synthetic import TOOLS, session

MODEL = "gpt-4o"

PROMPT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a careful agent."},
    {"role": "user", "content": "Read the two files.", "name": "ada"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "x = 1\n" * 40},
    {"role": "user", "content": [{"type": "text", "text": "And now summarise them."}]},
]


@pytest.mark.anyio
async def test_one_prompt_has_one_total_in_budget_the_ledger_and_replay() -> None:
    expected = litellm.token_counter(model=MODEL, messages=PROMPT, tools=TOOLS)
    counted = ctxmw.budget(PROMPT, MODEL, TOOLS)
    record = await CallRecorder("s").record(
        model=MODEL,
        wire_kwargs={"model": MODEL, "messages": PROMPT, "tools": TOOLS},
        transcript=PROMPT,
        response=text("done"),
    )
    replayed = await replay(
        [[*PROMPT, {"role": "assistant", "content": "done"}]], ["none"], model=MODEL, tools=TOOLS
    )
    assert record.budget is not None
    assert counted.total == expected
    assert record.prompt_tokens_local == expected
    assert record.budget["total"] == expected
    assert replayed.strategies["none"].calls[-1].prompt_tokens == expected


def test_budget_layers_add_up_to_litellms_count() -> None:
    counted = ctxmw.budget(PROMPT, MODEL)
    layers = counted.system + counted.history + counted.tool_results + counted.current
    assert layers + counted.overhead == litellm.token_counter(model=MODEL, messages=PROMPT)
    assert counted.current == LiteLLMCounter().message_tokens(MODEL, PROMPT[-1])


def test_the_fast_counter_differs_from_litellms_only_in_the_texts() -> None:
    messages, _ = session(12)
    real, fast = LiteLLMCounter(), ApproxCounter()
    for message in messages:
        texts = _counted_texts(message)
        tokenized = sum(litellm.token_counter(model=MODEL, text=t) for t in texts)
        estimated = sum(approx_tokens(t) for t in texts)
        # The framing (tokens per message, the role, the call ids) is litellm's in both.
        gap = fast.message_tokens(MODEL, message) - real.message_tokens(MODEL, message)
        assert gap == estimated - tokenized
    assert fast.overhead_tokens(MODEL) == real.overhead_tokens(MODEL) > 0
    assert fast.tools_tokens(MODEL, TOOLS, True) > 0


def _counted_texts(message: dict[str, Any]) -> list[str]:
    """The strings litellm tokenizes in a message: every string value and each call's arguments."""
    texts = [v for v in message.values() if isinstance(v, str)]
    return texts + [tc["function"]["arguments"] for tc in message.get("tool_calls") or []]


def test_a_custom_text_counter_keeps_litellms_framing() -> None:
    chars = LiteLLMCounter(text_tokens=len)
    message = {"role": "tool", "tool_call_id": "c1", "content": "r" * 400}
    # litellm: 3 tokens a message, then each string value: the role, the id, the content.
    assert chars.message_tokens(MODEL, message) == 3 + len("tool") + len("c1") + 400


def test_a_plain_function_counts_text_inside_litellm_framing() -> None:
    wrapped = ctxmw.budget(PROMPT, MODEL, counter=len)  # type: ignore[arg-type]
    explicit = ctxmw.budget(PROMPT, MODEL, counter=LiteLLMCounter(text_tokens=len))
    assert wrapped.total == explicit.total


def test_a_counter_that_is_neither_protocol_nor_callable_is_refused() -> None:
    with pytest.raises(ctxmw.UsageError, match=r"LiteLLMCounter\(text_tokens=fn\)"):
        ctxmw.budget(PROMPT, MODEL, counter=42)  # type: ignore[arg-type]


def test_a_malformed_message_is_counted_not_refused() -> None:
    broken = {"role": "assistant", "tool_calls": [{"id": "c1"}]}  # no "function"
    for counter in (LiteLLMCounter(), ApproxCounter()):
        assert counter.message_tokens(MODEL, broken) > 3
