"""What one request carries from the pre-call hook to its success or failure hook.

Kept in this process only, keyed by ``litellm_call_id``: the proxy runs every hook of a request
in the process that accepted it. Bounded in count and bytes: a request whose end hook never
ran (a crash inside litellm) is forgotten once ``max_requests`` newer ones are kept, or
``max_bytes`` of newer ones; its claimed notes are then taken over by the conversation's next
request (see :mod:`ctxmw.state`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ctxmw.proxy._guard import StateBudget
from ctxmw.proxy._routes import Translation
from ctxmw.runtime.identity import Identity
from ctxmw.settings import Settings
from ctxmw.state import Note
from ctxmw.strategies._chain import NamedStrategy
from ctxmw.types import Messages

__all__ = ["Pending", "PendingRequests"]


@dataclass(slots=True)
class Pending:
    """One request between its hooks.

    Attributes:
        identity: the conversation.
        settings: the request's resolved settings.
        strategies: the resolved chain (``inbox`` still in place).
        transcript: the caller's messages, as received.
        notes: inbox notes claimed for this request.
        key_label: the key, as the metrics label it.
        wire: what was sent upstream (``model``, ``messages``, ``tools``, ...), once known.
        trace: ``(strategy, output)`` per strategy.
        stats: the strategies' ``ctx.stats``.
        started: ``time.perf_counter()`` when the deployment hook handed the request on.
        translation: the route's translation to and from chat messages (:mod:`._routes`).
        passthrough: the shared state failed and the policy is ``open``: the caller's messages
            go upstream unchanged, and nothing is recorded.
        size: about the bytes the request's messages hold (``held_bytes``).
        budget: the request's time for the shared state, before and after the upstream call.
    """

    identity: Identity
    settings: Settings
    strategies: list[NamedStrategy]
    transcript: Messages
    notes: list[Note] = field(default_factory=list)
    key_label: str = ""
    wire: dict[str, Any] = field(default_factory=dict)
    trace: list[tuple[str, Messages]] = field(default_factory=list)
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    started: float = 0.0
    translation: Translation | None = None
    passthrough: bool = False
    size: int = 0
    budget: StateBudget = field(default_factory=lambda: StateBudget(2.0))


class PendingRequests:
    """A map from ``litellm_call_id`` to :class:`Pending`, bounded in count and bytes."""

    def __init__(self, max_requests: int = 10_000, max_bytes: int = 256 * 1024 * 1024) -> None:
        self._items: OrderedDict[str, Pending] = OrderedDict()
        self._max = max_requests
        self._max_bytes = max_bytes
        self.held_bytes = 0

    def put(self, call_id: str, pending: Pending) -> None:
        """Remember a request (the oldest forgotten past the bounds; the newest always stays)."""
        self.pop(call_id)
        self._items[call_id] = pending
        self.held_bytes += pending.size
        while len(self._items) > 1 and (
            len(self._items) > self._max or self.held_bytes > self._max_bytes
        ):
            self.pop(next(iter(self._items)))

    def get(self, call_id: object) -> Pending | None:
        """The request, if known."""
        return self._items.get(call_id) if isinstance(call_id, str) else None

    def pop(self, call_id: object) -> Pending | None:
        """Forget the request and return it."""
        found = self._items.pop(call_id, None) if isinstance(call_id, str) else None
        if found is not None:
            self.held_bytes -= found.size
        return found

    def __len__(self) -> int:
        return len(self._items)
