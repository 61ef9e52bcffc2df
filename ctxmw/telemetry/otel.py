"""OpenTelemetry export: one span per model call and the cache metrics, from each record.

Off unless configured: pass ``OtelExport()`` among ``on_call`` hooks (optionally with your own
tracer and meter providers), or set ``otel=True`` (``CTXMW_OTEL=1``) to use the global ones.
It needs the OpenTelemetry API (``pip install opentelemetry-api``, or ``pip install -e '.[otel]'``
in a ctxmw checkout; the SDK and
exporters are the application's choice).

Names follow the OpenTelemetry GenAI semantic conventions where they define one, ``ctxmw.*``
where they do not:

- the span ``chat {model}`` (kind CLIENT, from the call's start to its end) carries
  ``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.request.model``,
  ``gen_ai.conversation.id`` (the session), ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens``, ``gen_ai.usage.cache_read.input_tokens`` and
  ``gen_ai.usage.cache_creation.input_tokens`` (each only when the provider reported it: not
  reported is an absent attribute, never 0), then ``ctxmw.expected_cached_tokens``,
  ``ctxmw.prefix_tokens_local``, ``ctxmw.prompt_tokens_local``, ``ctxmw.cache_rule``,
  ``ctxmw.cost_usd``, ``ctxmw.round``, ``ctxmw.strategies``, ``ctxmw.epoch``,
  ``ctxmw.usage_estimated`` and, after a bust, ``ctxmw.bust.cause`` / ``.strategy`` /
  ``.message_index``; each fired alert is a span event ``ctxmw.alert``;
- metrics: ``gen_ai.client.token.usage`` (histogram, ``gen_ai.token.type`` input / output) and
  ``gen_ai.client.operation.duration`` (histogram, seconds), then the counters
  ``ctxmw.prompt.tokens`` (with ``ctxmw.cache.reported``: the denominator of a hit rate),
  ``ctxmw.cache.read.tokens``, ``ctxmw.cache.expected.tokens`` (over the calls that reported),
  ``ctxmw.cache.write.tokens``, ``ctxmw.cost`` (USD), ``ctxmw.cache.busts`` (by
  ``ctxmw.bust.cause`` and ``ctxmw.bust.strategy``) and ``ctxmw.alerts`` (by ``ctxmw.alert.rule``).
"""

from __future__ import annotations

import time
from typing import Any

from ctxmw._version import __version__
from ctxmw.errors import UsageError
from ctxmw.telemetry.record import CallRecord

__all__ = ["OtelExport"]

_NS = 1_000_000_000


class OtelExport:
    """An ``on_call`` hook that exports each record as a span and metrics.

    Args:
        tracer_provider: where spans go (default: the global one).
        meter_provider: where metrics go (default: the global one).

    Raises:
        UsageError: the OpenTelemetry API is not installed.
    """

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        try:
            from opentelemetry import metrics, trace
        except ImportError as exc:
            raise UsageError(
                "OpenTelemetry export needs the OpenTelemetry API, which is not installed; "
                "install it with pip install opentelemetry-api (in a ctxmw checkout: pip install "
                "-e '.[otel]'), or unset CTXMW_OTEL."
            ) from exc
        self._trace = trace
        tracers = tracer_provider or trace.get_tracer_provider()
        meters = meter_provider or metrics.get_meter_provider()
        self.tracer = tracers.get_tracer("ctxmw", __version__)
        meter = meters.get_meter("ctxmw", __version__)
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens used per call."
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="Seconds per model call."
        )
        counter = meter.create_counter
        self._prompt = counter("ctxmw.prompt.tokens", unit="{token}")
        self._read = counter("ctxmw.cache.read.tokens", unit="{token}")
        self._expected = counter("ctxmw.cache.expected.tokens", unit="{token}")
        self._written = counter("ctxmw.cache.write.tokens", unit="{token}")
        self._cost = counter("ctxmw.cost", unit="USD")
        self._busts = counter("ctxmw.cache.busts", unit="{bust}")
        self._alerts = counter("ctxmw.alerts", unit="{alert}")

    def __call__(self, record: CallRecord) -> None:
        """Export one record (the hook protocol)."""
        self._span(record)
        self._measure(record)

    def _span(self, record: CallRecord) -> None:
        end = time.time_ns()
        span = self.tracer.start_span(
            f"chat {record.model}",
            kind=self._trace.SpanKind.CLIENT,
            start_time=end - int(record.latency_s * _NS),
            attributes=span_attributes(record),
        )
        for alert in record.alerts:
            span.add_event(
                "ctxmw.alert",
                {
                    "ctxmw.alert.rule": alert["rule"],
                    "ctxmw.alert.message": alert["message"],
                    **({} if alert["value"] is None else {"ctxmw.alert.value": alert["value"]}),
                },
                timestamp=end,
            )
        span.end(end_time=end)

    def _measure(self, record: CallRecord) -> None:
        base = _base(record)
        self._tokens.record(record.prompt_tokens, {**base, "gen_ai.token.type": "input"})
        self._tokens.record(record.completion_tokens, {**base, "gen_ai.token.type": "output"})
        self._duration.record(record.latency_s, base)
        reported = record.cache_read_tokens is not None
        self._prompt.add(record.prompt_tokens, {**base, "ctxmw.cache.reported": reported})
        if record.cache_read_tokens is not None:
            self._read.add(record.cache_read_tokens, base)
            self._expected.add(record.expected_cached_tokens, base)
        if record.cache_write_tokens is not None:
            self._written.add(record.cache_write_tokens, base)
        if record.cost_usd is not None:
            self._cost.add(record.cost_usd, base)
        if record.bust is not None:
            cause = {"ctxmw.bust.cause": record.bust["cause"]}
            self._busts.add(1, {**base, **cause, "ctxmw.bust.strategy": _name(record)})
        for alert in record.alerts:
            self._alerts.add(1, {**base, "ctxmw.alert.rule": alert["rule"]})


def span_attributes(record: CallRecord) -> dict[str, Any]:
    """The span's attributes for one record (absent, not 0, where nothing was reported)."""
    attrs: dict[str, Any] = {
        **_base(record),
        "gen_ai.conversation.id": record.session,
        "gen_ai.usage.input_tokens": record.prompt_tokens,
        "gen_ai.usage.output_tokens": record.completion_tokens,
        "ctxmw.round": record.round,
        "ctxmw.cache_rule": record.cache_rule,
        "ctxmw.strategies": list(record.strategies),
        "ctxmw.prompt_tokens_local": record.prompt_tokens_local,
        "ctxmw.prefix_tokens_local": record.prefix_tokens_local,
        "ctxmw.expected_cached_tokens": record.expected_cached_tokens,
        "ctxmw.usage_estimated": record.usage_estimated,
    }
    optional: dict[str, Any] = {
        "gen_ai.usage.cache_read.input_tokens": record.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": record.cache_write_tokens,
        "ctxmw.cost_usd": record.cost_usd,
        "ctxmw.epoch": record.epoch,
    }
    if record.bust is not None:
        optional["ctxmw.bust.cause"] = record.bust["cause"]
        optional["ctxmw.bust.strategy"] = record.bust["strategy"]
        optional["ctxmw.bust.message_index"] = record.bust["message_index"]
    attrs.update({key: value for key, value in optional.items() if value is not None})
    return attrs


def _base(record: CallRecord) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": record.provider or "unknown",
        "gen_ai.request.model": record.model,
    }


def _name(record: CallRecord) -> str:
    return (record.bust["strategy"] if record.bust is not None else None) or ""
