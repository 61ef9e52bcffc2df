"""What the /v1/messages and /v1/responses routes share: chat messages made from a client's
request, and which of them the strategies passed on as they were."""

from __future__ import annotations

from ctxmw.types import Message, Messages

__all__ = ["ORIGIN", "Translation"]

ORIGIN = "ctxmw_origin"
"""The key on each chat message naming the client's piece it came from (a message and its
blocks, or ``input`` items): a strategy that rewrites a message keeps its other keys, so a
changed piece finds its source."""


class Translation:
    """The chat messages made from a client's request (:attr:`messages`, the strategies' input),
    each known by its object: one the strategies passed on is sent back in the client's own
    form, byte for byte."""

    def __init__(self) -> None:
        self.messages: Messages = []
        self._made: dict[int, Message] = {}  # the chat messages made here, by id

    def _add(self, message: Message) -> None:
        self.messages.append(message)
        self._made[id(message)] = message

    def _unchanged(self, message: Message) -> bool:
        """Whether ``message`` is one made here, as it was made (no strategy replaced it)."""
        return self._made.get(id(message)) is message
