"""What the recorder reads from one call besides its usage: provider, cost, the reply itself."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from ctxmw import _litellm
from ctxmw.telemetry.cost import fast_cost
from ctxmw.telemetry.rules import endpoint

__all__ = ["cost_of", "provider_of", "reply_of"]


def provider_of(model: str, kw: Mapping[str, Any]) -> str:
    """litellm's provider for this call ('' when litellm cannot tell)."""
    base = endpoint(kw)
    custom = kw.get("custom_llm_provider")
    if not (isinstance(base, str | None) and isinstance(custom, str | None)):
        return _provider(model, custom, base)
    return _routed(_litellm.price_map_version(), model, custom, base)


@functools.lru_cache(maxsize=256)
def _routed(version: tuple[int, int], model: str, custom: str | None, base: str | None) -> str:
    # Once per model name (litellm's routing takes ~50 us a call); a price map that gained
    # entries (register_model) may route anew.
    return _provider(model, custom, base)


def _provider(model: str, custom: Any, base: Any) -> str:
    routed = _litellm.llm_provider(model, custom, base)
    # None: the call itself would have failed first; keep the record anyway.
    return routed[1] if routed is not None else ""


def cost_of(response: object, model: str, provider: str) -> float | None:
    """litellm's cost of a response or consumed stream; None when it cannot price the model.

    A plain response is priced from the model's resolved rates (:mod:`~ctxmw.telemetry.cost`):
    litellm's figure without litellm's per-call resolution.
    """
    try:
        if isinstance(response, list | tuple):
            usage = next((u for u in map(_usage_of_chunk, reversed(response)) if u), None)
            if usage is None:
                return None
            prompt, completion = _litellm.cost_per_token(
                model, provider=provider or None, usage=usage
            )
            return prompt + completion
        if response is None:
            return None
        fast = fast_cost(response, model, provider)
        if fast is not None:
            return fast
        return _litellm.completion_cost(response, model, provider or None)
    except Exception:  # litellm cannot price this model: the ledger says null
        return None


def reply_of(response: object) -> Mapping[str, Any] | None:
    """The assistant message a call returned (a stream's text joined); None when there is none.

    A streamed reply with tool calls gives None: its pieces are not reassembled here.
    """
    if isinstance(response, list | tuple):
        return _streamed_reply(response)
    choices = _get(response, "choices")
    if not choices:
        return None
    message = _get(choices[0], "message")
    return {
        "role": "assistant",
        "content": _get(message, "content"),
        "tool_calls": _get(message, "tool_calls"),
    }


def _streamed_reply(chunks: list[Any] | tuple[Any, ...]) -> Mapping[str, Any] | None:
    text: list[str] = []
    for chunk in chunks:
        for choice in _get(chunk, "choices") or ():
            delta = _get(choice, "delta")
            if _get(delta, "tool_calls"):
                return None
            piece = _get(delta, "content")
            if isinstance(piece, str):
                text.append(piece)
    return {"role": "assistant", "content": "".join(text)} if text else None


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def _usage_of_chunk(chunk: object) -> Any:
    usage = getattr(chunk, "usage", None)
    if usage is None:
        hidden = getattr(chunk, "_hidden_params", None)
        usage = hidden.get("usage") if isinstance(hidden, Mapping) else None
    return usage
