"""ctxmw's counters on the proxy's Prometheus (``/metrics``), labelled by model, key, strategies.

``ctxmw_expected_cache_read_tokens_total`` beside ``ctxmw_reported_cache_read_tokens_total``:
a gap between them is the first thing to look at (a strategy or the caller moved the prefix, or
the provider's cache behaves unlike its rule). Also ``ctxmw_prompt_tokens_total`` and
``ctxmw_requests_total``, and ``ctxmw_failures_total`` by stage (see
:mod:`ctxmw.proxy._guard`). A provider that reports no cache reads (most self-hosted ones) adds
nothing to the reported counter. Needs ``prometheus_client`` (the proxy's own Prometheus
metrics use it); without it the counters are skipped.
"""

from __future__ import annotations

from typing import Any

from ctxmw.telemetry.record import CallRecord

__all__ = ["Metrics"]

_LABELS = ("model", "key", "strategies")


class Metrics:
    """The counters, registered once per process in ``prometheus_client``'s default registry."""

    _counters: dict[str, Any] | None = None

    def observe(self, record: CallRecord, key: str) -> None:
        """Add one record."""
        counters = self._registered()
        if not counters:
            return
        labels = {"model": record.model, "key": key, "strategies": ",".join(record.strategies)}
        counters["requests"].labels(**labels).inc()
        counters["prompt"].labels(**labels).inc(record.prompt_tokens)
        counters["expected"].labels(**labels).inc(record.expected_cached_tokens)
        if record.cache_read_tokens is not None:
            counters["reported"].labels(**labels).inc(record.cache_read_tokens)

    def failure(self, stage: str) -> None:
        """Count one failure of ctxmw's own work (see :mod:`ctxmw.proxy._guard`)."""
        counters = self._registered()
        if counters:
            counters["failures"].labels(stage=stage).inc()

    @classmethod
    def _registered(cls) -> dict[str, Any]:
        if cls._counters is None:
            cls._counters = _register()
        return cls._counters


def _register() -> dict[str, Any]:
    try:
        from prometheus_client import Counter
    except ImportError:  # pragma: no cover - depends on the installed extras
        return {}
    return {
        "requests": Counter("ctxmw_requests", "Requests ctxmw prepared.", _LABELS),
        "prompt": Counter("ctxmw_prompt_tokens", "Prompt tokens reported.", _LABELS),
        "expected": Counter(
            "ctxmw_expected_cache_read_tokens", "Cache reads ctxmw expected.", _LABELS
        ),
        "reported": Counter(
            "ctxmw_reported_cache_read_tokens", "Cache reads the provider reported.", _LABELS
        ),
        "failures": Counter(
            "ctxmw_failures", "ctxmw's own failures; the request went on.", ("stage",)
        ),
    }
