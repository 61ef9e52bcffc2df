"""The chain's input: the caller's messages as dicts, and how they relate to the previous call's.

With a conversation's memo, the previous call's input is kept (one copy per chain). This call's
is compared with it once: the identical head needs no type check or conversion (its dicts, or
last call's conversions of the same objects, are reused), only the new messages are looked at,
and the answer is published (:class:`~ctxmw.messages._incremental.Shared`) for the helpers of
the built-in strategies that read this very list, which would otherwise compare the same two
lists again each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxmw.messages._incremental import (
    GROWN_SLOT,
    MAX_MEMO_MESSAGES,
    SHARED_SLOT,
    Shared,
    compare_prefix,
    identical_prefix,
)
from ctxmw.messages.form import message_dict
from ctxmw.types import Messages

__all__ = ["chain_input"]


@dataclass(frozen=True, slots=True)
class _Kept:
    raw: list[Any]  # the caller's objects
    converted: list[Any]  # what the strategies received (the same list when all were dicts)
    given: object = None  # the very list object the chain was handed


def chain_input(messages: Sequence[Any], memo: dict[str, Any] | None, slot: str) -> Messages:
    """A new list of ``messages`` as dicts; with a memo, the comparison is published."""
    raw = list(messages)
    if memo is None:
        return _converted(raw) if _mixed(raw) else raw
    memo.pop(SHARED_SLOT, None)
    grown = memo.pop(GROWN_SLOT, None) is messages
    kept = memo.get(slot)
    if not isinstance(kept, _Kept):
        current = _converted(raw) if _mixed(raw) else raw
        _keep(memo, slot, raw, current, None, 0, messages)
        return current
    upto = min(len(kept.raw), len(raw))
    # The session's own list that only grew: its head is the kept copy's, no need to look.
    same = upto if grown and kept.given is messages else identical_prefix(kept.raw, raw, upto)
    head_mixed = same > 0 and kept.converted is not kept.raw
    if not head_mixed and not _mixed(raw[same:]):
        current = raw
    else:
        head = kept.converted[:same] if head_mixed else raw[:same]
        current = [*head, *_converted(raw[same:])]
    _keep(memo, slot, raw, current, kept, same, messages)
    return current


def _keep(
    memo: dict[str, Any],
    slot: str,
    raw: list[Any],
    current: list[Any],
    kept: _Kept | None,
    same: int,
    given: object,
) -> None:
    if len(raw) > MAX_MEMO_MESSAGES:
        memo.pop(slot, None)
        return
    # Copies: a strategy may append to the list it receives, never to these.
    inputs = list(current)
    memo[slot] = _Kept(inputs if current is raw else list(raw), inputs, given)
    if kept is None:
        return
    previous = kept.converted
    equal = same
    if same < min(len(previous), len(inputs)):
        equal += compare_prefix(previous[same:], inputs[same:])
    memo[SHARED_SLOT] = Shared(previous, inputs, equal, same, source=current)


def _mixed(messages: list[Any]) -> bool:
    return bool(set(map(type, messages)) - {dict})  # at C speed: most callers pass dicts only


def _converted(messages: list[Any]) -> list[Any]:
    # litellm Message objects as dicts: strategies read dicts, and would skip anything else.
    return [_as_dict(m) for m in messages]


def _as_dict(message: Any) -> Any:
    """Dicts as they are (the same object); litellm/pydantic Messages and mappings as dicts.

    Anything else is left alone: malformed material is kept and the validator reports it.
    """
    if isinstance(message, dict):
        return message
    if isinstance(message, Mapping) or hasattr(message, "model_dump"):
        return message_dict(message)
    return message
