"""``clear_tool_results``: the peer baseline, LangChain's ``ClearToolUsesEdit`` by name.

The same behaviour as LangChain's ``ClearToolUsesEdit`` and Anthropic's server-side
``clear_tool_uses_20250919`` context edit: once the prompt exceeds ``trigger`` tokens, every tool
result except the newest ``keep`` is replaced by ``placeholder``. It is recomputed on every call
from the full-fidelity transcript, so once triggered the cleared boundary moves with every new
result and the prompt prefix breaks on (almost) every call: ``ctxmw replay`` shows what that costs
next to the epoch strategies.

Details, as in LangChain's implementation:

- The trigger compares the tokens of the messages this strategy receives (``> trigger``, not
  ``>=``); tool definitions are not counted.
- ``keep`` counts the newest completed calls whatever their tool, excluded tools included; results
  of ``exclude_tools`` are never cleared.
- A cleared result keeps its ``tool_call_id`` (and every other key): pairs are never broken.
  Material that does not pair (an orphaned result) is left alone.
- ``clear_tool_inputs``: the cleared call's ``arguments`` become ``"{}"`` (LangChain sets the
  parsed ``args`` to ``{}``; Anthropic clears the ``tool_use`` input).

Not copied: LangChain's ``clear_at_least`` (stop clearing once enough tokens were reclaimed),
which is deprecated there. The default placeholder is LangChain's ``"[cleared]"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxmw.context.tokens import TokenCounter, as_counter, count_messages
from ctxmw.errors import UsageError
from ctxmw.history import keep, resume
from ctxmw.messages.pairs import ToolIndex, index_tools
from ctxmw.settings import Settings
from ctxmw.strategies._registry import register_strategy
from ctxmw.types import Message, Messages, StrategyContext

__all__ = ["ClearToolResults", "clear_tool_results"]

CLEARED_ARGUMENTS = "{}"
"""What a cleared call's ``arguments`` become with ``clear_tool_inputs``."""


@dataclass(frozen=True, slots=True)
class _Options:
    keep: int
    trigger: int
    exclude_tools: frozenset[str]
    placeholder: str
    clear_tool_inputs: bool


class ClearToolResults:
    """Replace every tool result but the newest ``keep`` once the prompt exceeds ``trigger``.

    Its options are settings, like every built-in strategy's: ``clear_tool_results_keep``,
    ``_trigger``, ``_exclude_tools``, ``_placeholder`` and ``_clear_tool_inputs`` (env
    ``CTXMW_CLEAR_TOOL_RESULTS_*``, or per session / call through ``strategy_options``).

    Args:
        counter: a :class:`~ctxmw.context.tokens.TokenCounter`; default litellm's for the call's
            model. Inside a session each distinct message is counted once.

    Raises:
        UsageError: an option is passed here instead of through the settings.
    """

    def __init__(self, *, counter: TokenCounter | None = None, **options: Any) -> None:
        if options:
            names = {f"clear_tool_results_{name}": value for name, value in options.items()}
            raise UsageError(
                f"ClearToolResults() takes its options from the settings, not as {options!r}; "
                f"pass strategy_options={names!r} to the Session, acompletion or "
                "prepare_prompt (settings=), or set the CTXMW_CLEAR_TOOL_RESULTS_* variables."
            )
        self.counter = counter

    def __call__(self, messages: Messages, ctx: StrategyContext) -> Messages:
        """Return ``messages`` with old tool results cleared, or unchanged under the trigger."""
        opts = _options(ctx.settings)
        stats: dict[str, Any] = {"triggered": False, "cleared": 0, "placeholder": opts.placeholder}
        ctx.stats["clear_tool_results"] = stats
        index = index_tools(messages, ctx.memo, "clear_tool_results")
        if len(index.calls) <= opts.keep:
            return messages
        if _tokens(messages, as_counter(self.counter), ctx.model, ctx.memo) <= opts.trigger:
            return messages
        stats["triggered"] = True
        out, stats["cleared"] = _clear(messages, index, opts, _copies(ctx.memo, messages))
        return out


def _options(s: Settings) -> _Options:
    return _Options(
        keep=max(s.clear_tool_results_keep, 0),
        trigger=s.clear_tool_results_trigger,
        exclude_tools=frozenset(s.clear_tool_results_exclude_tools),
        placeholder=s.clear_tool_results_placeholder,
        clear_tool_inputs=s.clear_tool_results_clear_tool_inputs,
    )


clear_tool_results = register_strategy("clear_tool_results")(ClearToolResults())
"""The registered instance: ``prompt_strategies="clear_tool_results"``."""


def _tokens(
    messages: Sequence[Any], counter: TokenCounter, model: str | None, memo: dict[str, Any] | None
) -> int:
    """Tokens of the messages; with a memo, only those past the first changed one are counted."""
    start, totals = resume(memo, _COUNTED, messages, key=(counter, model))
    if totals is None:
        totals = [0]  # totals[i]: tokens of messages[:i]
    del totals[start + 1 :]
    total = totals[-1]
    for tokens in count_messages(counter, model, messages[len(totals) - 1 :]):
        total += tokens
        totals.append(total)
    keep(memo, _COUNTED, messages, totals, key=(counter, model))
    return total


def _copies(memo: dict[str, Any] | None, messages: Sequence[Any]) -> dict[int, tuple[Any, Any]]:
    """Cleared copies by the id of their original, kept across calls: a result cleared once is
    sent as the same object from then on (its bytes cannot drift, its digest is cached)."""
    if memo is None:
        return {}
    copies: dict[int, tuple[Any, Any]] = memo.setdefault(_COPIES, {})
    if len(copies) > 2 * len(messages) + 64:  # originals no longer sent: let them go
        live = set(map(id, messages))
        for key in [key for key in copies if key not in live]:
            del copies[key]
    return copies


_COUNTED = "clear_tool_results:tokens"
_COPIES = "clear_tool_results:copies"


def _clear(
    messages: Messages, index: ToolIndex, opts: _Options, copies: dict[int, tuple[Any, Any]]
) -> tuple[Messages, int]:
    """The prompt with the old results cleared, and how many results changed."""
    candidates = index.calls[: len(index.calls) - opts.keep]
    out = list(messages)
    cleared = 0
    inputs: dict[int, set[str]] = {}
    for call in candidates:
        if call.name in opts.exclude_tools:
            continue
        result = messages[call.result_index]
        if result.get("content") != opts.placeholder:
            out[call.result_index] = _cleared(result, opts.placeholder, copies)
            cleared += 1
        if opts.clear_tool_inputs:
            inputs.setdefault(call.call_index, set()).add(call.id)
    for i, ids in inputs.items():
        out[i] = _without_arguments(messages[i], ids)
    return out, cleared


def _cleared(result: Message, placeholder: str, copies: dict[int, tuple[Any, Any]]) -> Message:
    kept = copies.get(id(result))
    if kept is not None and kept[0] is result and kept[1]["content"] == placeholder:
        return kept[1]  # type: ignore[no-any-return]  # stored below: a Message
    copy = {**result, "content": placeholder}
    copies[id(result)] = (result, copy)
    return copy


def _without_arguments(message: Message, ids: set[str]) -> Message:
    """A copy of an assistant message whose calls in ``ids`` have ``"{}"`` as arguments."""
    calls = []
    changed = False
    for tc in message["tool_calls"]:
        fn = tc.get("function") if isinstance(tc, dict) else None
        if (
            isinstance(fn, dict)
            and tc.get("id") in ids
            and fn.get("arguments") != CLEARED_ARGUMENTS
        ):
            tc = {**tc, "function": {**fn, "arguments": CLEARED_ARGUMENTS}}
            changed = True
        calls.append(tc)
    return {**message, "tool_calls": calls} if changed else message
