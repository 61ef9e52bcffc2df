"""The per-model message counter counts exactly as ``litellm.token_counter`` does per message."""

from __future__ import annotations

import json
from typing import Any

import litellm
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmw.context.tokens import ApproxCounter, LiteLLMCounter
from ctxmw.messages.canonical import canonical_json

MODELS = ("gpt-4o", "openai/gpt-4o-mini", "claude-3-5-sonnet-20241022", "no-such-model-xyz")

# A 1x1 PNG: an image litellm sizes without fetching anything.
PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

texts = st.text(max_size=60)
parts = st.lists(
    st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, texts),
        st.just({"type": "image_url", "image_url": {"url": PIXEL, "detail": "low"}}),
        st.just({"type": "image_url", "image_url": {"url": PIXEL}}),
    ),
    max_size=3,
)
calls = st.lists(
    st.builds(
        lambda i, name, arg: {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps({"a": arg})},
        },
        st.integers(0, 99),
        st.sampled_from(["read", "write_file"]),
        texts,
    ),
    min_size=1,
    max_size=3,
)
messages = st.one_of(
    st.builds(lambda r, t: {"role": r, "content": t}, st.sampled_from(["system", "user"]), texts),
    st.builds(lambda t, n: {"role": "user", "content": t, "name": n}, texts, st.text(max_size=8)),
    st.builds(lambda p: {"role": "user", "content": p}, parts),
    st.builds(lambda c: {"role": "assistant", "content": None, "tool_calls": c}, calls),
    st.builds(lambda t, c: {"role": "assistant", "content": t, "tool_calls": c}, texts, calls),
    st.builds(lambda t: {"role": "tool", "tool_call_id": "c1", "content": t}, texts),
    st.builds(lambda p: {"role": "tool", "tool_call_id": "c1", "content": p}, parts),
    st.just({"role": "assistant", "content": "", "function_call": {"name": "f", "arguments": ""}}),
    # Malformed: litellm refuses it, both paths count its JSON text as a user message.
    st.just({"role": "assistant", "content": None, "tool_calls": [{"id": "c9", "type": "x"}]}),
)


def per_call(model: str, message: dict[str, Any], custom: Any = None) -> int:
    """The count as ctxmw made it before: one ``litellm.token_counter`` call per message."""
    options = {"count_response_tokens": True, "custom_tokenizer": custom}
    try:
        return int(litellm.token_counter(model=model, messages=[message], **options))
    except (ValueError, TypeError, AttributeError):
        stand_in = {"role": "user", "content": canonical_json(message)}
        return int(litellm.token_counter(model=model, messages=[stand_in], **options))


@settings(deadline=None, max_examples=60)
@given(st.sampled_from(MODELS), messages)
def test_the_per_model_counter_equals_litellms_per_call_count(model: str, message: Any) -> None:
    assert LiteLLMCounter().message_tokens(model, message) == per_call(model, message)


@settings(deadline=None, max_examples=40)
@given(st.sampled_from(MODELS), messages)
def test_a_text_counter_keeps_the_equality(model: str, message: Any) -> None:
    from ctxmw._litellm import _custom_tokenizer

    counter = ApproxCounter(3)
    assert counter.message_tokens(model, message) == per_call(
        model, message, _custom_tokenizer(counter.text_tokens or len)
    )


def test_one_counter_counts_many_models_apart() -> None:
    counter = LiteLLMCounter()
    message = {"role": "user", "content": "hello there", "name": "ada"}
    for model in (*MODELS, *reversed(MODELS)):
        assert counter.message_tokens(model, message) == per_call(model, message)


def test_the_disable_switch_of_litellm_is_honoured(monkeypatch: Any) -> None:
    counter = LiteLLMCounter()
    counter.message_tokens("gpt-4o", {"role": "user", "content": "warm"})
    monkeypatch.setattr(litellm, "disable_token_counter", True)
    assert counter.message_tokens("gpt-4o", {"role": "user", "content": "hello"}) == 0


def test_counters_share_litellms_per_model_setup(monkeypatch: Any) -> None:
    """A second counter (a second session) makes no setup of its own for a model."""
    from ctxmw import _litellm
    from ctxmw.context import tokens

    made: list[str] = []
    real = _litellm.message_counter

    def counted(model: str, text_tokens: Any = None) -> Any:
        made.append(model)
        return real(model, text_tokens)

    monkeypatch.setattr(_litellm, "message_counter", counted)
    tokens._counter_for.cache_clear()
    message = {"role": "user", "content": "hello there"}
    first, second = LiteLLMCounter(), LiteLLMCounter()
    assert first.message_tokens("gpt-4o-mini", message) == second.message_tokens(
        "gpt-4o-mini", message
    )
    assert made == ["gpt-4o-mini"]
    tokens._counter_for.cache_clear()
