"""The cost from resolved rates is litellm's ``completion_cost``, exactly, or litellm is asked."""

from __future__ import annotations

from typing import Any

import litellm
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from litellm.types.utils import CompletionTokensDetailsWrapper

from ctxmw import _litellm
from ctxmw.telemetry import cost
from ctxmw.telemetry.response import cost_of, provider_of

_CHAT = sorted(
    name
    for name, entry in litellm.model_cost.items()
    if isinstance(entry, dict)
    and entry.get("mode") == "chat"
    and name != "sample_spec"
    # litellm tries to sign in to price these (a network call): not in the default suite.
    and entry.get("litellm_provider") not in ("chatgpt", "github_copilot")
)
MODELS = _CHAT[:: max(len(_CHAT) // 400, 1)]


def response(model: str, prompt: int, completion: int, read: int, write: int) -> Any:
    usage = _litellm.usage_object(prompt, completion, cached_tokens=read, cache_write_tokens=write)
    return _litellm.model_response("ok", None, usage, model)


def litellms(reply: Any, model: str, provider: str) -> float | None:
    try:
        return _litellm.completion_cost(reply, model, provider or None)
    except Exception:
        return None


@st.composite
def usages(draw: st.DrawFn) -> tuple[int, int, int, int]:
    prompt = draw(st.one_of(st.integers(0, 5_000), st.integers(0, 1_500_000)))
    read = draw(st.integers(0, prompt))
    write = draw(st.one_of(st.just(0), st.integers(0, prompt - read)))
    return prompt, draw(st.integers(0, 100_000)), read, write


@settings(deadline=None, max_examples=300)
@given(st.sampled_from(MODELS), usages(), st.booleans())
def test_the_fast_cost_is_litellms_cost(
    model: str, counts: tuple[int, int, int, int], served_as_asked: bool
) -> None:
    provider = provider_of(model, {})
    reply = response(model if served_as_asked else "some-served-name", *counts)
    fast = cost.fast_cost(reply, model, provider)
    if fast is not None:
        assert fast == litellms(reply, model, provider)


def test_most_chat_models_take_the_fast_path() -> None:
    handled = [
        m for m in MODELS if cost.fast_cost(response(m, 1_000, 10, 0, 0), m, provider_of(m, {}))
    ]
    assert len(handled) >= len(MODELS) // 2
    assert cost.fast_cost(response("gpt-4o", 10, 1, 0, 0), "gpt-4o", "openai") is not None


def test_a_tiered_model_prices_each_side_of_its_threshold_like_litellm() -> None:
    model = "gemini/gemini-2.5-pro"
    info = _litellm.model_info(model, "gemini")
    assert info.get("input_cost_per_token_above_200k_tokens") is not None
    for prompt in (199_999, 200_000, 200_001, 900_000):
        reply = response(model, prompt, 100, prompt // 3, 0)
        fast = cost.fast_cost(reply, model, "gemini")
        assert fast is not None
        assert fast == litellms(reply, model, "gemini")


def test_cost_of_gives_litellms_figure_through_the_fast_path() -> None:
    reply = response("gpt-4o-mini", 12_345, 67, 8_000, 0)
    assert cost.fast_cost(reply, "openai/gpt-4o-mini", "openai") is not None
    assert cost_of(reply, "openai/gpt-4o-mini", "openai") == litellms(
        reply, "openai/gpt-4o-mini", "openai"
    )


def test_a_usage_with_more_than_tokens_goes_to_litellm() -> None:
    reply = response("gpt-4o", 1_000, 500, 0, 0)
    reply.usage.completion_tokens_details = CompletionTokensDetailsWrapper(reasoning_tokens=400)
    assert cost.fast_cost(reply, "gpt-4o", "openai") is None
    reply = response("gpt-4o", 1_000, 500, 0, 0)
    reply.usage.prompt_tokens_details.audio_tokens = 10
    assert cost.fast_cost(reply, "gpt-4o", "openai") is None


def test_litellms_discounts_send_every_cost_to_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    reply = response("gpt-4o", 1_000, 500, 0, 0)
    assert cost.fast_cost(reply, "gpt-4o", "openai") is not None
    monkeypatch.setattr(litellm, "cost_discount_config", {"openai": 0.5})
    assert cost.fast_cost(reply, "gpt-4o", "openai") is None
    assert cost_of(reply, "gpt-4o", "openai") == litellms(reply, "gpt-4o", "openai")


def test_a_registered_price_is_picked_up(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "ctxmw-test-model-priced"
    monkeypatch.setattr(litellm, "model_cost", dict(litellm.model_cost))
    entry = {"litellm_provider": "openai", "mode": "chat", "output_cost_per_token": 2e-6}
    reply = response(name, 1_000, 10, 0, 0)
    litellm.register_model({name: {**entry, "input_cost_per_token": 1e-6}})
    before = cost.fast_cost(reply, name, "openai")
    litellm.register_model({name: {**entry, "input_cost_per_token": 3e-6}})
    after = cost.fast_cost(reply, name, "openai")
    assert before is not None
    assert after is not None
    assert after > before
    assert after == litellms(reply, name, "openai")


def test_the_probes_leave_the_priced_response_alone() -> None:
    reply = response("gpt-4o-2024-08-06", 777, 7, 5, 0)
    before = reply.usage.model_dump()
    assert cost.fast_cost(reply, "gpt-4o", "openai") is not None
    assert reply.usage.model_dump() == before
