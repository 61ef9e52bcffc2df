"""Token counting: one protocol, litellm's counter underneath, and the model's input window.

A :class:`TokenCounter` counts one message (its framing included), the tools block and the
request's fixed overhead separately, so callers can count each message once and add them up.
With :class:`LiteLLMCounter` the sum is exactly ``litellm.token_counter(model=..., messages=...,
tools=...)`` on the whole payload: ``ctxmw.budget()``, the telemetry record and ``ctxmw replay``
all count through it, so one prompt has one total everywhere.

:class:`ApproxCounter` is the same counter with the tokenizer replaced by "about four bytes a
token": litellm still frames every message (tokens per message, names, tool-call arguments,
images, the tools block, the reply primer), so it differs from the real count only where a text
does. It is for speed (``ctxmw replay --fast``) and for tests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol

from ctxmw import _litellm
from ctxmw.errors import UsageError
from ctxmw.messages._memo import session_cache
from ctxmw.messages.canonical import canonical_bytes, canonical_json

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_CONTEXT_WINDOW",
    "ApproxCounter",
    "LiteLLMCounter",
    "TokenCounter",
    "approx_tokens",
    "as_counter",
    "count_messages",
    "input_window",
]

CHARS_PER_TOKEN = 4
"""The tokenizer-free estimate's rate: characters (or UTF-8 bytes) per token. Every estimate
in ctxmw (:func:`approx_tokens`, the economic schedule's sizes, a breakpoint head's size,
the registry's held bytes) uses this one; counts go through the :class:`TokenCounter`."""

DEFAULT_CONTEXT_WINDOW = 128_000
"""Input window used when litellm does not know the model and no ``context_window`` is set."""

_SYSTEM_STUB: dict[str, str] = {"role": "system", "content": ""}
_COUNTS = f"memo:{__name__}.count_messages"


class TokenCounter(Protocol):
    """How ctxmw counts tokens; inject your own for tests or speed."""

    def message_tokens(self, model: str, message: Mapping[str, Any]) -> int:
        """Tokens of one message, per-message framing included."""
        ...

    def tools_tokens(self, model: str, tools: Sequence[Mapping[str, Any]], has_system: bool) -> int:
        """Tokens of the tool definitions (``has_system``: the messages hold a system message)."""
        ...

    def overhead_tokens(self, model: str) -> int:
        """Tokens every request carries besides its messages and tools (the reply primer)."""
        ...


@lru_cache(maxsize=256)
def _counter_for(model: str, text_tokens: Callable[[str], int] | None) -> _litellm.MessageCount:
    """litellm's per-model setup (tokenizer, framing constants), made once per process.

    Shared by every counter of the process, keyed by model and counting function, bounded:
    nothing of a conversation is kept.
    """
    return _litellm.message_counter(model, text_tokens)


class LiteLLMCounter:
    """Counts with ``litellm.token_counter`` (the model's tokenizer where litellm has one).

    Args:
        text_tokens: counts a text in place of the model's tokenizer (litellm still frames the
            messages); None: the tokenizer litellm picks for the model.
    """

    def __init__(self, text_tokens: Callable[[str], int] | None = None) -> None:
        self.text_tokens = text_tokens

    # Equal counters count alike: a session's memo shares their counts (a plain function
    # wrapped anew on every call still finds the counts of the previous call).
    def __eq__(self, other: object) -> bool:
        return isinstance(other, LiteLLMCounter) and (
            type(other) is type(self) and other.text_tokens == self.text_tokens
        )

    def __hash__(self) -> int:
        return hash((type(self), self.text_tokens))

    def message_tokens(self, model: str, message: Mapping[str, Any]) -> int:
        """Tokens of one message as litellm frames it, without the request overhead.

        A message litellm refuses to count (a tool call without ``function``, a content of an
        unknown shape) is counted as a user message holding its JSON text: malformed material
        is never "fixed", but counting it must not fail the call.
        """
        count = _counter_for(model, self.text_tokens)
        try:
            return count(message)
        except (ValueError, TypeError, AttributeError):
            return count({"role": "user", "content": canonical_json(message)})

    def tools_tokens(self, model: str, tools: Sequence[Mapping[str, Any]], has_system: bool) -> int:
        """Tokens litellm adds for ``tools`` (less when a system message is present)."""
        base = [_SYSTEM_STUB] if has_system else []
        count = self.text_tokens
        with_tools = _litellm.token_counter(model, base, tools=tools, text_tokens=count)
        return with_tools - _litellm.token_counter(model, base, text_tokens=count)

    def overhead_tokens(self, model: str) -> int:
        """litellm's reply primer for ``model``."""
        if self.text_tokens is None:
            return _overhead(model)
        return _litellm.token_counter(model, [], text_tokens=self.text_tokens)


class ApproxCounter(LiteLLMCounter):
    """litellm's framing with about ``bytes_per_token`` bytes of text a token: no tokenizer.

    Args:
        bytes_per_token: UTF-8 bytes of text counted as one token (rounded up per text).
    """

    def __init__(self, bytes_per_token: int = CHARS_PER_TOKEN) -> None:
        self.bytes_per_token = max(bytes_per_token, 1)
        super().__init__(text_tokens=self._text)

    def _text(self, text: str) -> int:
        return approx_tokens(text, self.bytes_per_token)


def approx_tokens(text: str, bytes_per_token: int = CHARS_PER_TOKEN) -> int:
    """``len(utf-8 bytes) / bytes_per_token``, rounded up: a tokenizer-free estimate."""
    return -(-len(text.encode("utf-8", "surrogatepass")) // max(bytes_per_token, 1))


def as_counter(counter: TokenCounter | None) -> TokenCounter:
    """``counter``, or :class:`LiteLLMCounter` when None.

    A plain ``text -> tokens`` function (the counters of earlier versions) is wrapped as
    ``LiteLLMCounter(text_tokens=fn)``: litellm frames the messages, the function counts text.

    Raises:
        UsageError: ``counter`` is neither a TokenCounter nor a callable.
    """
    if counter is None:
        return _DEFAULT
    if not hasattr(counter, "message_tokens") and callable(counter):
        return LiteLLMCounter(text_tokens=counter)
    if not hasattr(counter, "message_tokens"):
        raise UsageError(
            f"counter={counter!r} is not a TokenCounter (message_tokens, tools_tokens, "
            "overhead_tokens); wrap a text -> tokens function as LiteLLMCounter(text_tokens=fn)."
        )
    return counter


def count_messages(counter: TokenCounter, model: str | None, messages: Sequence[Any]) -> list[int]:
    """Tokens of each message (framing included), each distinct message counted once a session.

    Inside a strategy chain the counts are kept in the session's memo, keyed by the counter and
    a digest of the message's canonical bytes: a growing transcript only counts its new messages.
    """
    cache = session_cache(_COUNTS)
    name = model or ""
    if cache is None:
        return [counter.message_tokens(name, m) for m in messages]
    out = []
    for message in messages:
        key = (counter, name, _digest(message))
        tokens = cache.get(key)
        if tokens is None:
            tokens = counter.message_tokens(name, message)
            cache.put(key, tokens)
        out.append(tokens)
    return out


def _digest(message: Mapping[str, Any]) -> bytes:
    return hashlib.blake2b(canonical_bytes(message), digest_size=16).digest()


@lru_cache(maxsize=256)
def input_window(model: str | None) -> int:
    """The model's input window from litellm (``max_input_tokens``), else 128,000.

    Unknown models (and None) get :data:`DEFAULT_CONTEXT_WINDOW`; set the ``context_window``
    setting for a model litellm does not know. The answer is memoised per model name.
    """
    if not model:
        return DEFAULT_CONTEXT_WINDOW
    info = _litellm.model_info(model)
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return int(window) if isinstance(window, int) and window > 0 else DEFAULT_CONTEXT_WINDOW


@lru_cache(maxsize=256)
def _overhead(model: str) -> int:
    return _litellm.token_counter(model, [])


_DEFAULT = LiteLLMCounter()
