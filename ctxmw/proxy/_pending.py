"""What one request carries from the pre-call hook to its success or failure hook.

Kept in this process only (the proxy runs every hook of a request in the process that accepted
it), and found by the objects the proxy made for that request, never by an id the client can
send: ``litellm_call_id`` comes from the client's ``x-litellm-call-id`` header when it sends
one, so two requests may share it. The proxy hands every hook of one request the same logging
object (``litellm_logging_obj``, made before the pre-call hook), except the failure hook: the
proxy drops the logging object from its data, which is the pre-call hook's own ``data`` dict
(on ``/v1/responses``, a shallow copy of it, holding the same ``proxy_server_request``). A
request is registered under each of these objects, and holds them: while it is pending, none
can be freed, so no other request's object can take its ``id()``.

Bounded in count and bytes: a request whose end hook never ran (a crash inside litellm, a
client gone) is forgotten once ``max_requests`` newer ones are kept, or ``max_bytes`` of newer
ones; its claimed notes are then taken over by the conversation's next
request (see :mod:`ctxmw.state`).
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ctxmw.proxy._guard import StateBudget
from ctxmw.proxy._routes import Translation
from ctxmw.runtime.identity import Identity
from ctxmw.settings import Settings
from ctxmw.state import Note
from ctxmw.strategies._chain import NamedStrategy
from ctxmw.types import Messages

if TYPE_CHECKING:
    from ctxmw.proxy._readback import ReadbackPlan

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
        route: the route's call family (``chat``, ``anthropic``, ``responses``): a deployment
            call of another family is LiteLLM's own translation of this request (see
            :meth:`~ctxmw.proxy.callback.CtxmwProxyHook.async_pre_call_deployment_hook`).
        claim: the id its inbox notes are claimed under (ctxmw's own, unique per request).
        passthrough: the shared state failed and the policy is ``open``: the caller's messages
            go upstream unchanged, and nothing is recorded.
        size: about the bytes the request's messages hold (``held_bytes``).
        budget: the request's time for the shared state, before and after the upstream call.
        readback: its read-back plan, when the chain shows handles (:mod:`._readback_hook`).
        request: the request's data as the pre-call hook left it (read-back's extra calls
            are made from it).
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
    route: str = "chat"
    claim: str = field(default_factory=lambda: uuid.uuid4().hex)
    passthrough: bool = False
    size: int = 0
    budget: StateBudget = field(default_factory=lambda: StateBudget(2.0))
    readback: ReadbackPlan | None = None
    request: dict[str, Any] = field(default_factory=dict)

    def serves(self, route: str | None) -> bool:
        """Whether a deployment call of ``route`` gets the strategies: the request's own route
        (another is LiteLLM's translation of what it sent), unless it passes through."""
        return route == self.route and not self.passthrough


class PendingRequests:
    """A map from a request's own objects to its :class:`Pending` (see the module doc),
    bounded in count and bytes."""

    def __init__(self, max_requests: int = 10_000, max_bytes: int = 256 * 1024 * 1024) -> None:
        # By id() of a request's first handle: the handles themselves (held, so no id is
        # reused while the request is pending) and its Pending.
        self._items: OrderedDict[int, tuple[tuple[object, ...], Pending]] = OrderedDict()
        self._index: dict[int, int] = {}  # id() of every handle -> its request's key
        self._max = max_requests
        self._max_bytes = max_bytes
        self.held_bytes = 0

    def put(self, pending: Pending, *given: object) -> None:
        """Remember a request under each of the objects ``given`` (None ones left out); the
        oldest are forgotten past the bounds, the newest always stays."""
        handles = tuple(handle for handle in given if handle is not None)
        for handle in handles:
            self.pop(handle)
        key = id(handles[0])
        self._items[key] = (handles, pending)
        self._index.update((id(handle), key) for handle in handles)
        self.held_bytes += pending.size
        while len(self._items) > 1 and (
            len(self._items) > self._max or self.held_bytes > self._max_bytes
        ):
            _, (old, forgotten) = self._items.popitem(last=False)
            self._unindex(old)
            self.held_bytes -= forgotten.size

    def get(self, handle: object) -> Pending | None:
        """The request ``handle`` (the very object, not an equal one) belongs to, if known."""
        key = self._key(handle)
        return self._items[key][1] if key is not None else None

    def pop(self, *handles: object) -> Pending | None:
        """Forget the request the first of ``handles`` that names one belongs to; return it."""
        key = next((k for k in map(self._key, handles) if k is not None), None)
        if key is None:
            return None
        held, pending = self._items.pop(key)
        self._unindex(held)
        self.held_bytes -= pending.size
        return pending

    def _key(self, handle: object) -> int | None:
        key = self._index.get(id(handle)) if handle is not None else None
        if key is None or not any(h is handle for h in self._items[key][0]):
            return None
        return key

    def _unindex(self, handles: tuple[object, ...]) -> None:
        for handle in handles:
            self._index.pop(id(handle), None)

    def __len__(self) -> int:
        return len(self._items)
