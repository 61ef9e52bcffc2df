"""Read-backs answered beside the caller's own tool calls: kept, and put back into every prompt.

A reply that calls the caller's tools *and* reads back (``ctxmw_expand``) reaches the caller
with its own calls only. ctxmw answers the read-backs at once and keeps them as a
:class:`Splice`: the model's reply as it came, and the answers. Every later prompt whose input
holds that reply (as the caller got it: found by its calls' ids) carries the read-back calls
again, after the caller's own calls, and their answers after the caller's results for it
(:func:`splice_in`). The splice is built once and reused, so those bytes never change while
the reply is in the conversation: the prompt's prefix stays stable.

The splices live where the conversation's state does: in the save_file (a ``readback`` record
with ``"splice": true``, so another process resuming the file sends the same prompts), else in
the conversation's memory (a ``Session``, or the stateless registry's entry). Gone (a stateless
call without a save_file after a restart), the prompt simply lacks them: still valid.

A :class:`Readbacks` block is what one reply leaves for the save_file: the read-back rounds
answered inside the call (which no later prompt carries), or one splice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxmw.context.readback import is_readback
from ctxmw.messages.form import tool_calls_of
from ctxmw.types import Message, Messages

__all__ = ["Readbacks", "Splice", "call_ids", "live_splices", "splice_in"]

Key = tuple[str, ...]
"""The ids of a reply's own tool calls, in order: how a splice finds its reply."""


def call_ids(message: Mapping[str, Any]) -> Key:
    """The ids of an assistant message's tool calls (the empty tuple when it has none)."""
    return tuple(str(c.get("id")) for c in tool_calls_of(message))


@dataclass(slots=True, eq=False)
class Splice:
    """The read-backs of one reply that also called the caller's tools.

    Attributes:
        reply: the assistant message as the model sent it (its own calls and the read-backs).
        answers: the ``tool`` messages answering the read-backs, in order.
    """

    reply: Message
    answers: tuple[Message, ...]
    _built: tuple[Message, Message] | None = field(default=None, repr=False)

    @property
    def key(self) -> Key:
        """The ids of the reply's own calls: the caller's copy of the reply has exactly these."""
        return tuple(str(c.get("id")) for c in tool_calls_of(self.reply) if not is_readback(c))

    @property
    def calls(self) -> list[dict[str, Any]]:
        """The read-back calls, in the order the model made them."""
        return [c for c in tool_calls_of(self.reply) if is_readback(c)]

    @property
    def size(self) -> int:
        """About how many bytes the splice keeps alive (for the registry's bound)."""
        return sum(len(str(m.get("content") or "")) + 200 for m in (self.reply, *self.answers))

    def lines(self) -> Messages:
        """What the save_file holds: the reply as the model sent it, then the answers."""
        return [self.reply, *self.answers]

    def build(self, message: Message) -> Message:
        """``message`` (the caller's copy of the reply) with the read-back calls after its own.

        The same object for the same (or an equal) message, so the bytes never change.
        """
        built = self._built
        if built is not None and (built[0] is message or built[0] == message):
            return built[1]
        own = message.get("tool_calls")
        spliced = {**message, "tool_calls": [*(own if isinstance(own, list) else ()), *self.calls]}
        self._built = (message, spliced)
        return spliced

    @classmethod
    def from_lines(cls, lines: Sequence[Message]) -> Splice | None:
        """The splice a save_file's block holds (None when the block is not one)."""
        if not lines or not any(is_readback(c) for c in tool_calls_of(lines[0])):
            return None
        splice = cls(dict(lines[0]), tuple(lines[1:]))
        return splice if splice.key else None


@dataclass(frozen=True, slots=True)
class Readbacks:
    """One reply's read-backs, for the save_file: answered rounds, or a splice.

    Attributes:
        lines: the messages the block writes (assistant messages reading back, their answers).
        splice: the splice, when the block is one (its lines are :meth:`Splice.lines`).
    """

    lines: tuple[Message, ...]
    splice: Splice | None = None

    @classmethod
    def of(cls, splice: Splice) -> Readbacks:
        """The block that records ``splice``."""
        return cls(tuple(splice.lines()), splice)


def splice_in(messages: Messages, splices: Mapping[Key, Splice]) -> Messages:
    """``messages`` with each splice put back into the reply it belongs to (a new list), or
    ``messages`` itself when no splice applies. Never mutates a message.

    A reply's read-back calls follow its own calls; their answers follow the tool results
    after it. A splice is used at most once (call ids are unique in a valid conversation).
    """
    if not splices:
        return messages
    out: Messages = []
    used: set[Key] = set()
    pending: Splice | None = None
    for message in messages:
        if pending is not None and message.get("role") != "tool":
            out.extend(pending.answers)
            pending = None
        splice = _match(message, splices, used)
        if splice is not None:
            out.append(splice.build(message))
            pending = splice
            continue
        out.append(message)
    if pending is not None:
        out.extend(pending.answers)
    return out if used else messages


def _match(message: Message, splices: Mapping[Key, Splice], used: set[Key]) -> Splice | None:
    if message.get("role") != "assistant" or not message.get("tool_calls"):
        return None
    key = call_ids(message)
    splice = splices.get(key)
    if splice is None or key in used:
        return None
    used.add(key)
    return splice


def live_splices(splices: Mapping[Key, Splice], messages: Sequence[Message]) -> dict[Key, Splice]:
    """The splices whose reply is still among ``messages`` (the others can never apply)."""
    if not splices:
        return {}
    keys = {call_ids(m) for m in messages if m.get("role") == "assistant" and m.get("tool_calls")}
    return {key: splice for key, splice in splices.items() if key in keys}
