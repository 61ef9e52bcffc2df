"""Cache alerts offline: a session whose tools list changes mid-run, seen three ways.

The alerts arrive on the record (an ``on_call`` hook prints them), ``ctxmw stats --check``
exits 1 over the ledger, and ``ctxmw stats --html`` writes a page to look at. With the
OpenTelemetry SDK installed (``pip install opentelemetry-sdk``), the same calls are exported as
spans to an in-memory exporter. Run with ``python examples/cache_alerts.py``: no network, no key.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio

import ctxmw
from ctxmw.cli import main as ctxmw_cli
from ctxmw.telemetry import CallRecord
from ctxmw.testing import FakeCompletion, text, usage

SYSTEM = "You answer questions about the order book. " * 150  # ~1,350 tokens: cacheable


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def on_call(record: CallRecord) -> None:
    read = "not reported" if record.cache_read_tokens is None else record.cache_read_tokens
    expected = record.expected_cached_tokens
    print(f"prompt {record.prompt_tokens}, cache read {read}, expected {expected}")
    for alert in record.alerts:
        print(f"  ALERT {alert['rule']}: {alert['message']}")


def otel_hooks() -> tuple[list[Any], Any]:
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        return [], None
    from ctxmw.telemetry import OtelExport

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    return [OtelExport(tracer_provider=provider)], spans


async def main() -> None:
    otel, spans = otel_hooks()
    reads = (0, 1280, 0, 1408)  # what the (fake) provider reports: the third call missed
    fake = FakeCompletion(
        *(text(f"answer {i}", usage=usage(1400 + 50 * i, 5, cached_tokens=c))
          for i, c in enumerate(reads))
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        save_file = Path(tmp) / "agent.jsonl"
        history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        tool_lists = (["lookup"], ["lookup"], ["lookup", "refund"], ["lookup", "refund"])
        for i, names in enumerate(tool_lists):  # the third call adds a tool: a bust
            history.append({"role": "user", "content": f"Question {i}?"})
            reply = await ctxmw.acompletion(
                "openai/gpt-4o", history, save_file=save_file, completion=fake,
                tools=[tool(n) for n in names], on_call=[on_call, *otel],
                prompt_strategies="none",
            )  # fmt: skip
            history.append({"role": "assistant", "content": reply.choices[0].message.content})
        ledger = Path(tmp) / "agent.jsonl.ledger.jsonl"
        page = Path(tmp) / "cache.html"
        code = ctxmw_cli(["stats", str(ledger), "--check", "--html", str(page)])
        print("ctxmw stats --check exit code:", code)
        print("page:", page.stat().st_size, "bytes, self-contained")
    if spans is not None:
        print("OpenTelemetry spans:", [s.name for s in spans.get_finished_spans()])


anyio.run(main)
