"""Cache telemetry: provider cache reads beside the local prefix estimate, per model call.

The pure parts (reading usage, measuring a common prefix, provider caching rules, bust
attribution) know nothing of strategies or of the loop; :class:`CallRecorder` ties them together
for the wrapper; :mod:`~ctxmw.telemetry.alerts` evaluates the alert rules,
:mod:`~ctxmw.telemetry.otel` exports to OpenTelemetry, :mod:`ctxmw.telemetry.stats` summarises
ledgers and :mod:`~ctxmw.telemetry.report` draws them. litellm is imported lazily.
"""

from __future__ import annotations

from ctxmw.messages.canonical import canonical_bytes, payload_digest, tools_digest
from ctxmw.telemetry.alerts import Alert, AlertRules, AlertState
from ctxmw.telemetry.bust import Bust, CallShape, attribute_bust, call_shape
from ctxmw.telemetry.counters import ApproxCounter, LiteLLMCounter, TokenCounter
from ctxmw.telemetry.otel import OtelExport
from ctxmw.telemetry.prefix import PrefixResult, PrefixTracker, common_prefix_length
from ctxmw.telemetry.record import CallHook, CallRecord, LedgerWriter, ledger_path, log_record
from ctxmw.telemetry.recorder import CallRecorder
from ctxmw.telemetry.rules import (
    CACHE_RULES,
    cache_minimum,
    expected_cached_tokens,
    resolve_rule,
    uses_breakpoints,
)
from ctxmw.telemetry.usage import UsageReport, read_stream_usage, read_usage, with_stream_usage

__all__ = [
    "CACHE_RULES",
    "Alert",
    "AlertRules",
    "AlertState",
    "ApproxCounter",
    "Bust",
    "CallHook",
    "CallRecord",
    "CallRecorder",
    "CallShape",
    "LedgerWriter",
    "LiteLLMCounter",
    "OtelExport",
    "PrefixResult",
    "PrefixTracker",
    "TokenCounter",
    "UsageReport",
    "attribute_bust",
    "cache_minimum",
    "call_shape",
    "canonical_bytes",
    "common_prefix_length",
    "expected_cached_tokens",
    "ledger_path",
    "log_record",
    "payload_digest",
    "read_stream_usage",
    "read_usage",
    "resolve_rule",
    "tools_digest",
    "uses_breakpoints",
    "with_stream_usage",
]
