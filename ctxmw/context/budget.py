"""Budget accounting: tokens per layer of a prompt against the model's input window.

Counting goes through :mod:`ctxmw.context.tokens` (a :class:`TokenCounter`, litellm's by
default), the same counter the telemetry and ``ctxmw replay`` use: ``budget(prompt).total`` is
what the ledger records as the prompt's local size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxmw.context.tokens import (
    DEFAULT_CONTEXT_WINDOW,
    TokenCounter,
    as_counter,
    count_messages,
    input_window,
)
from ctxmw.messages.form import LAYERS, layer_of, role_of

__all__ = [
    "BANDS",
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_OUTPUT_RESERVATION",
    "Budget",
    "band_of",
    "budget",
    "budget_from_counts",
    "input_window",
]

DEFAULT_OUTPUT_RESERVATION = 4096
"""Tokens kept free for the answer unless the ``output_reservation`` setting says otherwise."""

BANDS: tuple[tuple[str, float], ...] = (
    ("critical", 0.90),
    ("summarize", 0.75),
    ("compress", 0.60),
    ("ok", 0.0),
)
"""Utilisation bands, from the top: the first whose floor the utilisation reaches applies."""

_REPLY_PRIMER = 3  # litellm's reply primer for chat models, counted once per prompt


@dataclass(frozen=True, slots=True)
class Budget:
    """Tokens per layer of one prompt, against the usable input window.

    Attributes:
        system: system (and developer) messages.
        tools: the tool definitions sent with the call.
        history: assistant messages (with their tool-call arguments) and older user messages.
        tool_results: ``tool`` messages.
        current: the newest user message.
        window: the model's input window, in tokens.
        output_reservation: tokens of the window kept free for the answer.
        overhead: tokens every request carries besides its messages and tools (the reply
            primer, as the counter counts it).
    """

    system: int
    tools: int
    history: int
    tool_results: int
    current: int
    window: int
    output_reservation: int
    overhead: int = _REPLY_PRIMER

    @property
    def total(self) -> int:
        """Tokens of the whole prompt (including the request overhead)."""
        layers = self.system + self.tools + self.history + self.tool_results + self.current
        return layers + self.overhead

    @property
    def usable(self) -> int:
        """The window minus the output reservation (at least 1)."""
        return max(self.window - self.output_reservation, 1)

    @property
    def utilisation(self) -> float:
        """``total / usable``: 1.0 means the prompt exactly fills what is usable."""
        return self.total / self.usable

    @property
    def band(self) -> str:
        """``ok``, ``compress`` (>= 0.60), ``summarize`` (>= 0.75) or ``critical`` (>= 0.90)."""
        return band_of(self.utilisation)

    def as_record(self) -> dict[str, Any]:
        """A plain dict for the telemetry record: the layers, the totals, utilisation and band."""
        return {
            "system": self.system,
            "tools": self.tools,
            "history": self.history,
            "tool_results": self.tool_results,
            "current": self.current,
            "total": self.total,
            "window": self.window,
            "output_reservation": self.output_reservation,
            "usable": self.usable,
            "utilisation": round(self.utilisation, 4),
            "band": self.band,
        }


def band_of(utilisation: float) -> str:
    """The band name of a utilisation (see :data:`BANDS`)."""
    return next(name for name, floor in BANDS if utilisation >= floor or floor == 0.0)


def budget(
    messages: Sequence[Any],
    model: str | None = None,
    tools: Sequence[Any] | None = None,
    *,
    output_reservation: int = DEFAULT_OUTPUT_RESERVATION,
    context_window: int | None = None,
    counter: TokenCounter | None = None,
) -> Budget:
    """Count ``messages`` (and ``tools``) per layer against ``model``'s input window.

    ``total`` equals ``litellm.token_counter(model=model, messages=messages, tools=tools)`` with
    the default counter, and the telemetry record's ``prompt_tokens_local`` for the same payload.

    Args:
        messages: the prompt, OpenAI-format dicts.
        model: the litellm model name; picks the tokenizer and the window.
        tools: the tool definitions sent with the call, if any.
        output_reservation: tokens kept free for the answer.
        context_window: the input window; default :func:`input_window` of ``model``.
        counter: a :class:`~ctxmw.context.tokens.TokenCounter`; default litellm's.

    Raises:
        UsageError: ``counter`` is not a TokenCounter.
    """
    count = as_counter(counter)
    name = model or ""
    has_system = any(role_of(m) == "system" for m in messages)
    return budget_from_counts(
        messages,
        count_messages(count, name, messages),
        count.tools_tokens(name, list(tools), has_system) if tools else 0,
        window=context_window if context_window is not None else input_window(model),
        output_reservation=output_reservation,
        overhead=count.overhead_tokens(name),
    )


def budget_from_counts(
    messages: Sequence[Any],
    counts: Sequence[int],
    tools_tokens: int,
    *,
    window: int,
    output_reservation: int = DEFAULT_OUTPUT_RESERVATION,
    overhead: int = _REPLY_PRIMER,
) -> Budget:
    """A :class:`Budget` from per-message token counts already at hand (telemetry has them).

    Args:
        messages: the prompt; only roles are read.
        counts: tokens of each message, in order.
        tools_tokens: tokens of the tool definitions.
        window: the model's input window.
        output_reservation: tokens kept free for the answer.
        overhead: the request's fixed overhead (the reply primer).
    """
    layers = dict.fromkeys(LAYERS, 0)
    last_user = max((i for i, m in enumerate(messages) if role_of(m) == "user"), default=-1)
    for i, (msg, tokens) in enumerate(zip(messages, counts, strict=True)):
        layers[layer_of(msg, i == last_user)] += tokens
    return Budget(
        tools=tools_tokens,
        window=window,
        output_reservation=output_reservation,
        overhead=overhead,
        **layers,
    )
