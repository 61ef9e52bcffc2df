"""What one call's :class:`~ctxmw.telemetry.record.CallRecord` says, from its measurements.

The :class:`~ctxmw.telemetry.recorder.CallRecorder` measures a call (the payload's prefix
against the previous call's, the usage the provider reported, what moved a broken prefix); this
module turns those measurements into the record's fields. It keeps no state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ctxmw.telemetry.bust import Bust
from ctxmw.telemetry.marks import payload_marks
from ctxmw.telemetry.prefix import PrefixResult
from ctxmw.telemetry.record import CallRecord
from ctxmw.telemetry.response import cost_of
from ctxmw.telemetry.rules import cache_minimum, expected_cached_tokens
from ctxmw.telemetry.usage import UsageReport, read_stream_usage, read_usage

__all__ = ["CallFacts", "call_record", "read_call_usage", "round_latency"]

Stats = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What the recorder knows of a call before measuring it."""

    session: str
    call: int
    round: int
    model: str
    provider: str
    rule: str
    kind: str
    readback: bool
    latency_s: float
    prompt_cache_key: str | None


def call_record(
    facts: CallFacts,
    *,
    transcript: Sequence[Any],
    messages: Sequence[Any],
    tools: Any,
    trace: Sequence[tuple[str, Sequence[Any]]] | None,
    stats: Stats,
    prefix: PrefixResult,
    usage: UsageReport,
    response: object,
    bust: Bust | None,
    budget: dict[str, Any],
) -> CallRecord:
    """The record of one call (before the alert rules see it)."""
    reported = not usage.estimated
    return CallRecord(
        ts=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        session=facts.session,
        call=facts.call,
        round=facts.round,
        model=facts.model,
        provider=facts.provider,
        cache_rule=facts.rule,
        strategies=tuple(name for name, _ in trace or ()),
        messages_in=len(transcript),
        messages_out=len(messages),
        calls_compacted=_stat_sum(stats, "calls_compacted"),
        calls_dropped=_stat_sum(stats, "calls_dropped"),
        epoch=_epoch(stats),
        prompt_tokens_local=prefix.prompt_tokens,
        prefix_tokens_local=prefix.prefix_tokens,
        expected_cached_tokens=_expected(facts, prefix),
        prompt_tokens=usage.prompt_tokens if reported else prefix.prompt_tokens,
        cache_read_tokens=usage.cache_read_tokens if reported else None,
        cache_write_tokens=usage.cache_write_tokens if reported else None,
        completion_tokens=usage.completion_tokens,
        usage_estimated=usage.estimated,
        cost_usd=cost_of(response, facts.model, facts.provider),
        latency_s=round_latency(facts.latency_s),
        bust=bust,
        payload_digest=prefix.payload_digest,
        budget=budget,
        kind=facts.kind,
        cache_marks=payload_marks(messages, tools, indices=prefix.marked),
        prompt_cache_key=facts.prompt_cache_key,
        readback=facts.readback,
    )


def read_call_usage(response: object, stream: object | None, kw: Mapping[str, Any]) -> UsageReport:
    """The usage of a response (or of a consumed stream's chunks); a mock's is estimated."""
    if isinstance(response, list | tuple):
        usage = read_stream_usage(response, stream)
    else:
        usage = read_usage(response)
    if kw.get("mock_response") is not None:  # litellm made this usage up: not reported
        usage = replace(usage, cache_read_tokens=None, cache_write_tokens=None, estimated=True)
    return usage


def round_latency(seconds: float) -> float:
    """Latency as stored in the ledger: seconds, to the microsecond."""
    return round(max(seconds, 0.0), 6)


def _expected(facts: CallFacts, prefix: PrefixResult) -> int:
    """The cached tokens the provider's rule leads to expect, at most the prompt."""
    expected = expected_cached_tokens(
        facts.rule,
        prefix_tokens=prefix.prefix_tokens,
        marked_prefix_tokens=prefix.marked_prefix_tokens,
        minimum=cache_minimum(facts.rule, facts.model, facts.provider or None),
        partial_tokens=prefix.partial_tokens,
        reply_tokens=prefix.reply_tokens,
    )
    return min(expected, prefix.prompt_tokens)


def _stat_sum(stats: Stats, key: str) -> int:
    return sum(int(entry.get(key, 0) or 0) for entry in stats.values())


def _epoch(stats: Stats) -> int | None:
    for entry in stats.values():
        value = entry.get("epoch")
        if isinstance(value, int):
            return value
    return None
