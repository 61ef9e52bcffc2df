"""``CallRecorder``: the one telemetry object the wrapper holds per session.

Wiring it into a tool loop (one recorder per session, i.e. per save_file or ``session=`` id)::

    recorder = CallRecorder(session_id, save_file=save_file, settings=settings, on_call=hooks)
    trace: list[tuple[str, Messages]] = []
    prompt = await apply_strategies(transcript, strategies, ctx, trace=trace)
    kwargs = recorder.prepare_kwargs({**user_kwargs, "messages": prompt, "tools": tools})
    start = time.perf_counter()
    response = await litellm.acompletion(**kwargs)
    record = await recorder.record(
        model=kwargs["model"], wire_kwargs=kwargs, transcript=transcript, trace=trace,
        stats=ctx.stats, response=response, latency_s=time.perf_counter() - start, round=n,
    )

For ``stream=True``, iterate the stream first, then pass the list of chunks the caller saw as
``response`` and the consumed litellm stream object as ``stream`` (it tells a provider-reported
usage from litellm's tokenizer estimate). Calls must be recorded in the order they were made;
``record`` serialises itself, so concurrent sessions each need their own recorder.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio

from ctxmw.context.budget import Budget
from ctxmw.context.tokens import input_window
from ctxmw.history import DigestSlots
from ctxmw.settings import Settings
from ctxmw.telemetry._fields import CallFacts, call_record, read_call_usage
from ctxmw.telemetry.alerts import AlertRules, AlertState
from ctxmw.telemetry.bust import (
    Bust,
    CallShape,
    PendingShape,
    attribute_bust,
    attribute_pending,
    shape_from_json,
    shape_to_json,
)
from ctxmw.telemetry.counters import TokenCounter
from ctxmw.telemetry.default_ledger import ledger_writer
from ctxmw.telemetry.levers import with_prompt_cache_key
from ctxmw.telemetry.prefix import PrefixResult, PrefixTracker
from ctxmw.telemetry.record import (
    CallHook,
    CallRecord,
    LedgerWriter,
    deliver,
    ledger_line,
)
from ctxmw.telemetry.record import log_record as _log_record
from ctxmw.telemetry.response import provider_of, reply_of
from ctxmw.telemetry.rules import endpoint, resolve_rule, self_hosted
from ctxmw.telemetry.usage import UsageReport, with_stream_usage

__all__ = ["CallRecorder"]

# A call with more never-seen messages than this (a first call on a long resumed transcript)
# counts them ahead in chunks on the loop, giving it back between chunks (why on the loop:
# docs/design/performance.md, "Where the time of a call goes").
_COUNT_AHEAD = 64


class CallRecorder:
    """Builds one :class:`CallRecord` per model call of a session and delivers it.

    Args:
        session: the session id (the save_file path, or an explicit ``session=`` id).
        save_file: when given, records are appended to ``<save_file>.ledger.jsonl`` beside it.
        ledger: without a save_file, a ledger file of its own (the default ledger, see
            :mod:`ctxmw.telemetry.default_ledger`): owner-only, rotated at the
            ``ledger_max_bytes`` setting.
        settings: supplies ``cache_rule``, ``prompt_cache_key``, ``otel`` and the ``alert_*``
            rules; defaults to ``Settings()``.
        on_call: hooks called with each record (sync or async); a failing hook is logged.
            With ``otel=True`` an :class:`~ctxmw.telemetry.otel.OtelExport` on the global
            providers is added after them.
        logger: where the INFO line goes; the ``"ctxmw"`` logger by default.
        token_counter: counts prompt tokens; litellm's ``token_counter`` by default.
    """

    def __init__(
        self,
        session: str,
        *,
        save_file: str | os.PathLike[str] | None = None,
        ledger: str | os.PathLike[str] | None = None,
        settings: Settings | None = None,
        on_call: Iterable[CallHook] = (),
        logger: logging.Logger | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        self.session = session
        self.settings = settings if settings is not None else Settings()
        self.hooks = list(on_call)
        self.logger = logger if logger is not None else logging.getLogger("ctxmw")
        self.ledger = ledger_writer(save_file, ledger, self.settings)
        self._held: tuple[bytes, ...] = ()  # ledger lines built by record(hold_ledger=True)
        self._digests = DigestSlots()
        self._tracker = PrefixTracker(token_counter, self._digests)
        self._shape: CallShape | PendingShape | None = None  # the previous agent call's
        self._seen = 0
        self._calls = 0
        self._hits = (0, 0)  # cache reads and prompt tokens of the calls that reported reads
        self._lock = anyio.Lock(fast_acquire=True)  # uncontended: no extra loop step a call
        self._alerts = AlertState(AlertRules.from_settings(self.settings))
        self._otel: tuple[CallHook, ...] = ()
        if self.settings.otel:
            from ctxmw.telemetry.otel import OtelExport

            self._otel = (OtelExport(),)

    @property
    def held_tokens(self) -> int:
        """Tokens of the last payload this recorder keeps (for the next call's prefix)."""
        return self._tracker.held_tokens

    @property
    def held_counts(self) -> int:
        """Token counts this recorder memoises per message (bounded by the payload's size)."""
        return self._tracker.held_counts

    @property
    def hit_rate(self) -> float | None:
        """The session's cache reads over the prompt tokens of its calls that reported them."""
        reads, prompt = self._hits
        return reads / prompt if prompt else None

    @property
    def ledger_path(self) -> Path | None:
        """Where records are appended, if anywhere."""
        return self.ledger.path if self.ledger is not None else None

    def prepare_kwargs(self, kwargs: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        """``kwargs`` plus what makes the call measurable and cacheable, where it is taken.

        ``stream_options={"include_usage": True}`` on a stream (see
        :func:`ctxmw.telemetry.usage.with_stream_usage`), and a stable per-conversation
        ``prompt_cache_key`` unless the ``prompt_cache_key`` setting is off (see
        :mod:`ctxmw.telemetry.levers`). The input is never modified.
        """
        kwargs = with_stream_usage(kwargs, str(kwargs.get("model", "")))
        if self.settings.prompt_cache_key:
            kwargs = with_prompt_cache_key(kwargs)
        return kwargs

    async def record(
        self,
        *,
        model: str,
        wire_kwargs: Mapping[str, Any],
        transcript: Sequence[Mapping[str, Any]],
        trace: Sequence[tuple[str, Sequence[Mapping[str, Any]]]] | None = None,
        stats: Mapping[str, Mapping[str, Any]] | None = None,
        response: object = None,
        latency_s: float = 0.0,
        round: int = 0,
        stream: object | None = None,
        kind: str = "agent",
        readback: bool = False,
        hold_ledger: bool = False,
    ) -> CallRecord:
        """Measure one finished call, deliver the record to every sink, and return it.

        Args:
            model: the model name the call used.
            wire_kwargs: exactly what was passed to the completion function (``messages``,
                ``tools``, ``api_base``, ``cache_control_injection_points``, ...).
            transcript: the full-fidelity transcript the strategies started from.
            trace: ``(strategy name, output)`` per strategy, from ``apply_strategies(trace=)``.
            stats: the strategies' ``ctx.stats``.
            response: the ``ModelResponse``, or the list of chunks of a consumed stream.
            latency_s: wall-clock seconds of the call.
            round: the tool-loop round.
            stream: the consumed litellm stream object, for streamed calls.
            kind: ``"agent"``, or ``"summary"`` for a strategy's own call: measured against
                the previous agent call, it is not what the next agent call is measured against.
            readback: ctxmw's call past a reply that only read back; measured as a summary is.
            hold_ledger: build the ledger line but leave it for :meth:`take_held` (a
                caller that writes it in a worker-thread trip of its own) instead of a trip here.
        """
        async with self._lock:
            record, line = await self._build(
                model,
                wire_kwargs,
                transcript,
                trace,
                stats or {},
                response,
                latency_s,
                round,
                stream,
                (kind, readback),
            )
        _log_record(self.logger, record, self.hit_rate)
        if self.hooks or self._otel:
            await deliver([*self.hooks, *self._otel], record, self.logger)
        if self.ledger is not None and hold_ledger:
            self._held += (line,)
        elif self.ledger is not None:
            await self.ledger.write_line(line)
        return record

    def take_held(self) -> Callable[[], None] | None:
        """The ledger lines ``record(hold_ledger=True)`` held, taken now (on the loop), as one
        job for a worker thread: one write, in the order recorded. None when none wait.
        """
        ledger, data, self._held = self.ledger, b"".join(self._held), ()
        if ledger is None or not data:
            return None
        return _HeldLines(ledger, data)

    def export_state(self) -> dict[str, Any]:
        """What the next call's measurement depends on, as JSON-ready data.

        A recorder built elsewhere (another replica of a fleet) and given this through
        :meth:`restore_state` records the next call exactly as this one would.
        """
        shape = self._shape
        if isinstance(shape, PendingShape):
            shape = shape.resolve_now(self._digests)
            self._digests.end_lookups()
        return {
            "prefix": self._tracker.export(),
            "shape": None if shape is None else shape_to_json(shape),
            "seen": self._seen,
            "calls": self._calls,
            "hits": list(self._hits),
            "alerts": self._alerts.export(),
        }

    def restore_state(self, data: Mapping[str, Any]) -> None:
        """Continue from :meth:`export_state`'s data."""
        self._tracker.restore(data.get("prefix"))
        shape = data.get("shape")
        self._shape = None if shape is None else shape_from_json(shape)
        self._seen = int(data.get("seen", 0))
        self._calls = int(data.get("calls", 0))
        hits = data.get("hits") or [0, 0]
        self._hits = (int(hits[0]), int(hits[1]))
        self._alerts.restore(data.get("alerts"))

    async def _build(
        self,
        model: str,
        kw: Mapping[str, Any],
        transcript: Sequence[Mapping[str, Any]],
        trace: Sequence[tuple[str, Sequence[Mapping[str, Any]]]] | None,
        stats: Mapping[str, Mapping[str, Any]],
        response: object,
        latency_s: float,
        round: int,
        stream: object | None,
        kinds: tuple[str, bool] = ("agent", False),
    ) -> tuple[CallRecord, bytes]:
        """The call's record and its ledger line (empty without a ledger).

        The line is built once, from the data the alert rules read, before the hooks see the
        record and apart from the write (a caller may write it in its own worker trip); the
        data itself is not held across the write's wait.
        """
        # The list as sent, not a copy: the payload's digests are the tracker's; the other
        # lists (the transcript, each strategy's output) only when a bust is attributed.
        messages, tools = _as_list(kw.get("messages")), kw.get("tools") or None
        provider = provider_of(model, kw)
        rule = resolve_rule(self.settings.cache_rule, model, provider, endpoint(kw))
        side = kinds != ("agent", False)  # a summary, a read-back: against the last agent call
        shape = PendingShape(
            self._digests, self._tracker.tools_digest(tools), transcript, trace, side=side
        )
        prefix, bust = await self._measure(model, messages, tools, kw, rule, provider, shape, side)
        usage = read_call_usage(response, stream, kw)
        key = kw.get("prompt_cache_key") if isinstance(kw.get("prompt_cache_key"), str) else None
        self._tracker.note_reply(reply_of(response))
        self._count(usage)
        if not side:
            self._shape = shape
        facts = CallFacts(
            self.session, self._calls, round, model, provider, rule, *kinds, latency_s, key
        )
        record = call_record(
            facts,
            transcript=transcript,
            messages=messages,
            tools=tools,
            trace=trace,
            stats=stats,
            prefix=prefix,
            usage=usage,
            response=response,
            bust=bust,
            budget=self._budget(model, prefix),
        )
        return self._with_alerts(record)

    async def _measure(
        self,
        model: str,
        messages: list[Any],
        tools: Any,
        kw: Mapping[str, Any],
        rule: str,
        provider: str,
        shape: PendingShape,
        side: bool,
    ) -> tuple[PrefixResult, Bust | None]:
        """The payload's prefix against the previous call's and, when it broke, what moved it."""
        try:
            prefix = await self._observe(
                model,
                messages,
                tools,
                kw.get("cache_control_injection_points"),
                # A chat template renders the tools only on a self-hosted server cached as such;
                # a custom api_base declared OpenAI-like (cache_rule="openai") counts as OpenAI.
                rule == "exact" and self_hosted(provider, endpoint(kw)),
                remember=not side,
            )
            return prefix, await self._bust(shape, prefix)
        finally:  # the call's lookups by object id never outlive it, whatever happened
            self._digests.end_call("side:" if side else "")

    def _count(self, usage: UsageReport) -> None:
        self._calls += 1
        if usage.cache_read_tokens is not None and not usage.estimated:
            reads, prompt = self._hits
            self._hits = (reads + usage.cache_read_tokens, prompt + usage.prompt_tokens)

    def _with_alerts(self, record: CallRecord) -> tuple[CallRecord, bytes]:
        """The record with the alerts it made fire, and its ledger line (empty without one)."""
        data = record.to_dict()
        alerts = self._alerts.observe(data) if self.settings.alerts else ()
        if alerts:  # rare: a rule fired
            record = replace(record, alerts=tuple(alerts))
            data["alerts"] = list(record.alerts)
        return record, ledger_line(data) if self.ledger is not None else b""

    async def _bust(self, shape: PendingShape, prefix: PrefixResult) -> Bust | None:
        """What moved the prefix, when it shrank: only then are the two calls' lists compared."""
        previous = self._shape
        if previous is None or not prefix.broke:
            return None
        at, system = prefix.first_diff, prefix.system_changed
        if isinstance(previous, PendingShape):  # both calls' lists are still here
            return await attribute_pending(previous, shape, at, system=system)
        current = await shape.resolve(self._digests)  # the previous call's digests came restored
        return attribute_bust(previous, current, at, prefix.broke, system=system)

    def _budget(self, model: str, prefix: PrefixResult) -> dict[str, Any]:
        # Layer sums come from the tracker, kept cumulatively: no per-call pass over the history.
        return Budget(
            tools=prefix.tools_tokens,
            window=self.settings.context_window or input_window(model),
            output_reservation=self.settings.output_reservation,
            overhead=prefix.prompt_tokens - prefix.tools_tokens - prefix.cumulative_tokens[-1],
            **prefix.layer_tokens,
        ).as_record()

    async def _observe(
        self,
        model: str,
        messages: list[Any],
        tools: Any,
        injection_points: Any,
        template_tools: bool,
        remember: bool = True,
    ) -> PrefixResult:
        many_new = len(messages) - self._seen > _COUNT_AHEAD
        if remember:
            self._seen = len(messages)
        if many_new:
            await self._tracker.count_ahead(model, messages, remember)
        args = (model, messages, tools, injection_points, template_tools, remember)
        return self._tracker.observe(*args, end_call=False)  # ended once the bust is named


def _as_list(messages: object) -> list[Any]:
    if isinstance(messages, list):
        return messages
    return list(messages) if isinstance(messages, Iterable) else []


@dataclass(slots=True)
class _HeldLines:
    """:meth:`CallRecorder.take_held`'s job: the held lines, appended to the ledger in the
    commit's worker thread."""

    ledger: LedgerWriter
    data: bytes

    def __call__(self) -> None:
        self.ledger.append_now(self.data)
