"""Token counting: injectable, memoised, with litellm's tokenizer and windows as the default.

``Counter`` is text -> tokens. The default, :func:`default_counter`, calls
``litellm.token_counter`` for the model, imported on first use so that importing ctxmw stays
cheap. Per-message counts are memoised on the message's canonical JSON and the counter, so a
growing transcript only counts its new messages (pass the same counter object every call).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ctxmw.context.survival import content_text

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "Counter",
    "count_message",
    "count_text",
    "default_counter",
    "input_window",
]

Counter = Callable[[str], int]
"""Counts the tokens of a text."""

DEFAULT_CONTEXT_WINDOW = 128_000
"""Input window used when litellm does not know the model and no ``context_window`` is set."""

MESSAGE_OVERHEAD = 3  # litellm's tokens_per_message for chat models
_PART_TOKENS = 85  # a non-text part (image, file): OpenAI's low-detail image cost


def count_message(msg: Any, counter: Counter) -> int:
    """Tokens of one message: its text, its tool calls and litellm's per-message overhead."""
    try:
        key = json.dumps(msg, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        key = repr(msg)
    return _count_message(key, counter)


@lru_cache(maxsize=16384)
def _count_message(key: str, counter: Counter) -> int:
    msg = json.loads(key) if key.startswith("{") else {}
    content = msg.get("content")
    parts = content if isinstance(content, list) else []
    other = sum(1 for p in parts if not (isinstance(p, dict) and p.get("type") == "text"))
    text = "\n".join(
        t
        for t in (
            str(msg.get("role") or ""),
            content_text(content),
            *_call_texts(msg.get("tool_calls")),
            str(msg.get("name") or ""),
            str(msg.get("tool_call_id") or ""),
        )
        if t
    )
    return MESSAGE_OVERHEAD + counter(text) + other * _PART_TOKENS


def _call_texts(tool_calls: Any) -> list[str]:
    out = []
    for tc in tool_calls if isinstance(tool_calls, list) else ():
        fn = tc.get("function") if isinstance(tc, dict) else None
        if isinstance(fn, dict):
            out += [str(fn.get("name") or ""), str(fn.get("arguments") or "")]
    return out


def count_text(text: str, counter: Counter) -> int:
    """Tokens of a text (memoised per counter)."""
    return _count_text(text, counter)


@lru_cache(maxsize=4096)
def _count_text(text: str, counter: Counter) -> int:
    return counter(text)


@lru_cache(maxsize=64)
def default_counter(model: str | None) -> Counter:
    """``litellm.token_counter`` for ``model`` (its default tokenizer when None), as text -> int.

    One function object per model, so the memoised counts are shared between calls.
    """

    def count(text: str) -> int:
        import litellm  # lazily: importing ctxmw must not import litellm

        return int(litellm.token_counter(model=model or "", text=text))

    return count


@lru_cache(maxsize=256)
def input_window(model: str | None) -> int:
    """The model's input window from litellm (``max_input_tokens``), else 128,000.

    Unknown models (and None) get :data:`DEFAULT_CONTEXT_WINDOW`; set the ``context_window``
    setting for a model litellm does not know. The answer is memoised per model name.
    """
    if not model:
        return DEFAULT_CONTEXT_WINDOW
    import litellm

    # litellm prints a provider list to stdout for unknown models; keep the caller's stdout clean.
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            info = litellm.get_model_info(model)
        except Exception:  # litellm raises bare Exception subclasses for unmapped models
            return DEFAULT_CONTEXT_WINDOW
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return int(window) if isinstance(window, int) and window > 0 else DEFAULT_CONTEXT_WINDOW
