"""What the proxy hook does for read-back, stage by stage (the round itself: :mod:`._readback`).

1. :func:`prepare`, before the strategies: the conversation's kept read-backs
   (:mod:`._readback_state`) are answered again from the request's messages and put back into
   the replies they belong to; the result is the strategies' input.
2. :func:`declare_tool`, on what the deployment hook returns: ``ctxmw_expand`` is declared
   (:func:`~ctxmw.proxy._readback.declare`).
3. :func:`settle` (a whole reply) or :func:`stream`: the round, its extra
   calls made through the router (:class:`Rounds`), and :func:`keep` for read-backs beside the
   client's own calls.

Every path drives the library's one round (:class:`~ctxmw.runtime._readback.Round`): a whole
reply through :func:`~ctxmw.runtime._readback.read_back`, a stream through
:class:`~ctxmw.runtime._readback_stream.ReadbackStream`, reading chat chunks or, on
``/v1/messages`` and ``/v1/responses``, events (:mod:`._readback_events`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ctxmw.proxy import _inbox as inbox
from ctxmw.proxy import _readback_state as kept
from ctxmw.proxy._guard import failed, http_error
from ctxmw.proxy._pending import Pending
from ctxmw.proxy._readback import ReadbackPlan, declare, router_call_kwargs, router_method
from ctxmw.proxy._readback_events import event_stream
from ctxmw.proxy.metrics import Metrics
from ctxmw.proxy.telemetry import FleetRecorders
from ctxmw.runtime._readback import read_back
from ctxmw.runtime._readback_stream import ReadbackStream
from ctxmw.runtime._splices import Splice, splice_in
from ctxmw.runtime.turn import Turn
from ctxmw.state import State
from ctxmw.strategies._chain import reads_back
from ctxmw.types import Messages

__all__ = [
    "Rounds",
    "answered",
    "declare_tool",
    "keep",
    "prepare",
    "records",
    "settle",
    "splice_of",
    "stream",
]

logger = logging.getLogger("ctxmw")


async def prepare(state: State, pending: Pending, max_bytes: int) -> None:
    """Give ``pending`` its read-back plan, and its kept read-backs spliced into its transcript
    (none when the chain shows no handle, or the state does not answer in time)."""
    if not reads_back([name for name, _ in pending.strategies], pending.settings):
        return
    conversation = pending.identity.conversation
    try:
        entries = await pending.budget.run(lambda: kept.load(state, conversation))
    except Exception as exc:  # the prompt is valid without them
        logger.warning("ctxmw proxy: read-backs not loaded (%s)", type(exc).__name__)
        entries = []
    plan = ReadbackPlan(
        pending.route, pending.transcript, pending.settings.readback_max_chars, max_bytes, entries
    )
    found = kept.splices_of(entries, pending.transcript)
    splices = {}
    for key, (reply, _) in found.items():
        calls = Splice(reply, ()).calls
        splices[key] = Splice(reply, tuple(await plan.answer(calls, refuse=False)))
    plan.entries = [entry for _, entry in found.values()]  # the replies still sent
    pending.transcript = splice_in(pending.transcript, splices)
    plan.source = pending.transcript
    pending.readback = plan


def declare_tool(pending: Pending, sent: dict[str, Any], prompt: Messages) -> dict[str, Any]:
    """``sent`` with ``ctxmw_expand`` declared when this request gets it (see the module doc)."""
    plan = pending.readback
    if plan is None:
        return sent
    declared = declare(plan.route, sent, reads_back=True)
    if declared is None:
        return sent
    plan.sent, plan.prompt = declared, prompt
    return declared


class Rounds:
    """The extra calls of one request's round (:class:`~ctxmw.runtime._readback.Rounds`, and
    :class:`~ctxmw.runtime._readback_stream.StreamRounds` for a stream, chat or events).

    Args:
        plan: the request's plan.
        kwargs: the first extra call's kwargs (:func:`~ctxmw.proxy._readback.router_call_kwargs`).
        router: the proxy's router.
        wire: the request's chat wire (model, tools), for the ledger.
        reply: the reply being answered (None: a stream, whose reply is its chunks).
        failed: awaited with the error when an extra call fails; what it raises goes on
            (nothing: the error itself).
    """

    def __init__(
        self,
        plan: ReadbackPlan,
        kwargs: dict[str, Any],
        router: Any,
        wire: Mapping[str, Any],
        reply: Any = None,
        failed: Callable[[Exception], Awaitable[None]] | None = None,
    ) -> None:
        self.plan, self.kwargs, self.router, self.wire = plan, kwargs, router, wire
        self.reply, self.answers, self.streams = reply, list[Any](), 0
        self._wire = dict(wire)  # the chat wire of the stream being read
        self._failed = failed

    async def answer(self, calls: Sequence[Mapping[str, Any]], *, refuse: bool) -> Messages:
        self.answers = await self.plan.answer(calls, refuse=refuse)
        return self.answers

    async def again(self, sent: Messages) -> Any:
        self.kwargs = self.plan.follow(self.kwargs, sent, self.reply, self.answers)
        try:
            if self.router is None:
                raise RuntimeError("the proxy has no router (llm_router) to make the call through")
            response = await router_method(self.router, self.plan.route)(**self.kwargs)
        except Exception as exc:
            if self._failed is not None:
                await self._failed(exc)
            raise
        self.reply = response
        if not self.kwargs.get("stream"):
            self.plan.calls.append(({**self.wire, "messages": sent}, response))
        else:
            self._wire = {**self.wire, "messages": sent}
        return response

    async def recorded(self, chunks: list[Any], stream: Any) -> None:
        self.streams += 1
        if self.streams == 1:
            self.plan.first = list(chunks)
        else:
            self.plan.calls.append((self._wire, list(chunks)))


async def settle(
    pending: Pending, data: Mapping[str, Any], response: Any, router: Any
) -> tuple[Any, Splice | None]:
    """The reply the client gets for a whole ``response``, and a splice to keep (if any).

    Raises:
        Exception: an extra call failed (the router's error, unchanged).
    """
    plan = pending.readback
    assert plan is not None  # the hook calls this only for a declared plan
    kwargs = router_call_kwargs(plan, pending.request or data, stream=False)
    rounds = Rounds(plan, kwargs, router, pending.wire, response)
    turn = Turn(working=[])
    final = await read_back(
        response, plan.prompt, turn, rounds, message_of=plan.message_of, strip=plan.strip
    )
    return final, _splice(turn)


def stream(
    state: State,
    pending: Pending,
    data: Mapping[str, Any],
    response: Any,
    router: Any,
    metrics: Metrics,
) -> tuple[ReadbackStream, Turn]:
    """The client's stream for a ``response`` stream (chat chunks, or a route's events), and
    the turn that gets its splice. An extra call that fails ends the stream as it answers a
    whole reply: the claimed notes given back, HTTP 502 saying why."""
    plan = pending.readback
    assert plan is not None  # the hook calls this only for a declared plan
    kwargs = router_call_kwargs(plan, pending.request or data, stream=True)
    turn = Turn(working=[])

    async def failed(exc: Exception) -> None:
        if pending.notes:
            await inbox.give_back(state, pending, metrics)
        raise http_error(502, _failure(pending, exc)) from exc

    rounds = Rounds(plan, kwargs, router, pending.wire, failed=failed)
    if plan.route != "chat":
        return event_stream(response, plan, turn, rounds), turn
    return ReadbackStream(response, plan.prompt, turn, rounds, intercept=True), turn


async def keep(state: State, pending: Pending, splice: Splice | None) -> None:
    """Keep a reply's read-backs beside the client's calls for the next requests (see
    :mod:`._readback_state`); the conversation's replies no longer sent are forgotten. A
    state that fails is logged: the next prompts then lack them, still valid."""
    plan = pending.readback
    entry = kept.entry_of(splice) if plan is not None and splice is not None else None
    if plan is None or entry is None:
        return
    entries = [e for e in plan.entries if e["key"] != entry["key"]] + [entry]
    conversation = pending.identity.conversation
    try:
        await pending.budget.run(lambda: kept.save(state, conversation, entries))
    except Exception as exc:
        logger.warning("ctxmw proxy: read-backs not kept (%s)", type(exc).__name__)


async def answered(
    state: State,
    pending: Pending,
    data: Mapping[str, Any],
    response: Any,
    router: Any,
    metrics: Metrics,
) -> Any:
    """The reply the client gets for a whole ``response``; read-backs beside its own calls
    kept. An extra call that fails gives the claimed notes back (the request's answer is
    lost to the client, so nothing was delivered) and answers HTTP 502 saying why.
    """
    try:
        final, splice = await settle(pending, data, response, router)
    except Exception as exc:
        if pending.notes:
            await inbox.give_back(state, pending, metrics)
        raise http_error(502, _failure(pending, exc)) from exc
    await keep(state, pending, splice)
    return final


async def records(telemetry: FleetRecorders, pending: Pending, metrics: Metrics) -> list[Any]:
    """The ledger records of the request's extra calls, each marked ``readback``."""
    out: list[Any] = []
    plan = pending.readback
    if plan is None:
        return out
    for wire, reply in plan.calls:
        try:
            out.append(await telemetry.record(pending, plan.shaped(reply), wire))
        except Exception as exc:  # a record lost never breaks the answer
            failed("telemetry", exc, metrics)
    return out


def _failure(pending: Pending, exc: BaseException) -> str:
    model = pending.wire.get("model") or "the request's model"
    return (
        f"The model called ctxmw_expand to read back a compacted tool result; ctxmw answered "
        f"it, but its next call to {model!r} through the proxy's router failed "
        f"({type(exc).__name__}: {str(exc)[:200]}). Nothing was delivered; send the request again."
    )


def splice_of(turn: Turn) -> Splice | None:
    """The splice a finished round left in ``turn``, if any."""
    return _splice(turn)


def _splice(turn: Turn) -> Splice | None:
    return next((b.splice for _, b in turn.blocks if b.splice is not None), None)
