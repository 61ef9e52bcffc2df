"""A conversation as its strategy chain sees it, and what changed since the previous call.

A conversation (a :class:`~ctxmw.Session`, a stateless caller's kept conversation, the proxy's)
keeps one :class:`History` per strategy chain in its memo (:func:`history_of`). Each call, the
chain hands the History its input (:meth:`History.update`), which compares it with the
previous call's input once and records the answer:

- ``messages``: this call's input as dicts, a copy nobody changes;
- ``previous``: the previous call's ``messages``;
- ``unchanged``: how many messages at the start equal the previous call's (identity first);
- ``same``: how many of those are the very same objects;
- ``revision``: how many calls the History has seen (since it last started afresh);
- ``held_bytes``: about the bytes of the two inputs it keeps (each new message measured once).

Only the new messages are looked at: the identical head needs no type check or conversion (the
previous call's conversions of the same objects are reused), and a conversation that told the
History its list only grew (:meth:`History.grows`, a Session's own turn list) is not compared
at all.

The strategies' helpers read the answer instead of comparing the same two lists again:
:func:`~ctxmw.history.resume` and friends ask :func:`answer` for the History of
the list they were handed, which is the running chain's while the strategies that pass its input
on run (:meth:`History.publish`); for any other list they compare.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ctxmw.history._compare import compare_prefix, identical_prefix
from ctxmw.messages.form import held_bytes, message_dict
from ctxmw.types import Messages

__all__ = ["MAX_MEMO_MESSAGES", "History", "answer", "as_dicts", "history_of"]

MAX_MEMO_MESSAGES = 200_000
"""Inputs longer than this are not kept across calls (a History, a strategy's memo)."""

_active: ContextVar[History | None] = ContextVar("ctxmw_history", default=None)


class History:
    """One conversation's input to one strategy chain, call after call (see the module)."""

    __slots__ = (
        "_given",
        "_grown",
        "_raw",
        "_sizes",
        "held_bytes",
        "messages",
        "previous",
        "revision",
        "same",
        "source",
        "unchanged",
    )

    def __init__(self) -> None:
        self._forget()

    def _forget(self) -> None:
        self.messages: list[Any] = []
        self.previous: list[Any] = []
        self.unchanged = 0
        self.same = 0
        self.revision = 0
        self.source: list[Any] | None = None  # the list handed to the strategies, while valid
        self._raw: list[Any] = []  # the caller's objects of the last input
        self._given: object = None  # the very list object the last call was handed
        self._grown: object = None
        self._sizes: list[int] = []  # held_bytes of each of ``messages``
        self.held_bytes = 0

    def grows(self, messages: Sequence[Any]) -> None:
        """Say that ``messages``, handed to the next :meth:`update`, only grew (append, extend)
        since any earlier update it was handed to: its head is not compared."""
        self._grown = messages

    def update(self, messages: Sequence[Any]) -> Messages:
        """This call's input as a new list of dicts; records what changed since the last call."""
        grown, self._grown = self._grown is messages, None
        raw = list(messages)
        previous, converted = self._raw, self.messages
        upto = min(len(previous), len(raw))
        if upto == 0 or (grown and self._given is messages):
            same = upto  # nothing kept, or the conversation's own list that only grew
        else:
            same = identical_prefix(previous, raw, upto)
        head_mixed = same > 0 and converted is not previous
        if not head_mixed and not _mixed(raw[same:]):
            current = raw
        else:
            head = converted[:same] if head_mixed else raw[:same]
            current = [*head, *map(_as_dict, raw[same:])]
        self._keep(raw, current, same, messages)
        return current

    @contextmanager
    def publish(self, current: list[Any]) -> Iterator[None]:
        """Answer the helpers' questions about ``current`` (the chain's input) inside."""
        self.source = current if self.revision else None  # nothing kept: nothing to answer
        token = _active.set(self)
        try:
            yield
        finally:
            self.source = None
            _active.reset(token)

    def _keep(self, raw: list[Any], current: list[Any], same: int, given: object) -> None:
        if len(raw) > MAX_MEMO_MESSAGES:
            self._forget()  # too long to keep: start afresh next time
            return
        # A copy: a strategy may append to the list it receives, never to this one.
        inputs = list(current)
        equal = same
        if self.revision and same < min(len(self.messages), len(inputs)):
            equal += compare_prefix(self.messages[same:], inputs[same:])
        self.previous, self.messages = self.messages, inputs
        old, self._sizes = self._sizes, self._sizes[:same]
        self._sizes += map(held_bytes, inputs[same:])
        # The previous input's messages from the first new object on are held by it alone.
        self.held_bytes = sum(self._sizes) + sum(old) - sum(old[:same]) + 16 * len(inputs)
        self.unchanged, self.same = (equal, same) if self.revision else (0, 0)
        self._raw = inputs if current is raw else raw
        self._given = given
        self.revision += 1


def history_of(memo: dict[str, Any], chain: Sequence[str]) -> History:
    """The History of the chain named ``chain`` in a conversation's ``memo`` (made on first use).

    One per chain: replay runs a second chain on each prompt with the same memo.
    """
    slot = "history:" + ",".join(chain)
    found = memo.get(slot)
    if not isinstance(found, History):
        found = memo[slot] = History()
    return found


def answer(current: Sequence[Any]) -> History | None:
    """The running chain's History when ``current`` is the list it handed the strategies, None
    otherwise (compare). Its ``previous`` is the list a helper kept on the previous call when
    it kept :func:`~ctxmw.history.kept_copy`."""
    found = _active.get()
    return found if found is not None and found.source is current else None


def as_dicts(messages: Sequence[Any]) -> list[Any]:
    """``messages`` as a new list of dicts: litellm/pydantic Messages and mappings as the dicts
    they dump to, dicts as they are (the same objects)."""
    raw = list(messages)
    return list(map(_as_dict, raw)) if _mixed(raw) else raw


def _mixed(messages: list[Any]) -> bool:
    return bool(set(map(type, messages)) - {dict})  # at C speed: most callers pass dicts only


def _as_dict(message: Any) -> Any:
    # Anything else is left alone: malformed material is kept and the validator reports it.
    if isinstance(message, dict):
        return message
    if isinstance(message, Mapping) or hasattr(message, "model_dump"):
        return message_dict(message)
    return message
