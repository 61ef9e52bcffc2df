"""The inbox of a proxy conversation: notes claimed before the upstream call, settled after.

When ``inbox`` is in a request's strategy list, the pre-call hook claims the conversation's
waiting notes from the shared state (at most the request's ``inbox_max_messages``, the oldest
first; every ``abort`` whatever the count, the rest wait for the next request). An abort
answers the request with HTTP 400 and gives the other notes back; the notes claimed are shown
to the model by :func:`fleet_inbox`, and settled (delivered) after the answer, or given back
when the request failed.
"""

from __future__ import annotations

from ctxmw.proxy._guard import (
    StateUnavailable,
    after_answer,
    before_upstream,
    failed,
    http_error,
)
from ctxmw.proxy._pending import Pending
from ctxmw.proxy.metrics import Metrics
from ctxmw.state import Note, State
from ctxmw.strategies._chain import NamedStrategy
from ctxmw.types import Messages, StrategyContext

__all__ = ["claim", "fleet_inbox", "give_back", "settle"]


async def claim(state: State, pending: Pending, policy: str, metrics: Metrics) -> None:
    """Claim the request's notes into ``pending.notes``.

    Raises:
        HTTPException: 400 when an abort was waiting; 503 when the state cannot answer within
            the request's budget and ``policy`` is ``closed`` (``open``: the request is passed
            through unchanged).
    """
    conversation, call_id = pending.identity.conversation, pending.claim
    limit = pending.settings.inbox_max_messages
    try:
        notes = await before_upstream(
            lambda: state.claim_notes(conversation, call_id, limit), pending.budget
        )
        stop = next((n for n in notes if n.kind == "abort"), None)
        if stop is not None:
            kept = [n for n in notes if n is not stop]
            await before_upstream(lambda: state.settle(conversation, call_id, kept), pending.budget)
    except StateUnavailable as exc:
        _unavailable(pending, exc, policy, metrics)
        return
    if stop is not None:
        reason = stop.text.strip() or "no reason was given"
        raise http_error(
            400,
            f"ctxmw: conversation {conversation!r} was aborted through its inbox: {reason}. "
            "Stop the agent, or start a new conversation (a new session id).",
        )
    pending.notes = notes


def _unavailable(pending: Pending, exc: StateUnavailable, policy: str, metrics: Metrics) -> None:
    if policy == "open":
        failed("inbox claim (sent unchanged)", exc, metrics)
        pending.passthrough = True
        return
    failed("inbox claim", exc, metrics)
    # Not chained: the cause is named, and its text (a Redis error) stays out of the logs.
    raise http_error(
        503,
        f"ctxmw: the proxy's shared state (Redis) did not answer in time ({exc}), so this "
        "conversation's inbox and abort switch cannot be read; retry shortly.",
    ) from None


async def settle(state: State, pending: Pending, metrics: Metrics) -> None:
    """The request was answered: its notes are delivered."""
    conversation, call_id = pending.identity.conversation, pending.claim

    async def delivered() -> None:
        await state.settle(conversation, call_id)

    await after_answer("inbox settle", delivered, pending.budget, metrics)


async def give_back(state: State, pending: Pending, metrics: Metrics) -> None:
    """The request failed: its notes go back to the conversation's inbox."""
    conversation, call_id = pending.identity.conversation, pending.claim

    async def requeue() -> None:
        await state.settle(conversation, call_id, pending.notes)

    await after_answer("inbox give-back", requeue, pending.budget, metrics)


def fleet_inbox(notes: list[Note]) -> NamedStrategy:
    """``inbox`` in the proxy: the notes claimed from the shared state, as user messages."""
    shown: Messages = [{"role": "user", "content": n.text} for n in notes if n.text.strip()]

    def inbox(messages: Messages, ctx: StrategyContext) -> Messages:
        if not shown:
            return messages
        ctx.stats["inbox"] = {"delivered": list(shown), "files": []}
        return [*messages, *shown]

    return "inbox", inbox
