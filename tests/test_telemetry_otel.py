"""OpenTelemetry export, through the SDK's in-memory span exporter and metric reader."""

from __future__ import annotations

import sys
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the OTel SDK comes with the dev extra")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ctxmw
from ctxmw.errors import UsageError
from ctxmw.settings import Settings
from ctxmw.telemetry import ApproxCounter, CallRecorder
from ctxmw.telemetry.otel import OtelExport
from ctxmw.testing import FakeCompletion, text, usage

pytestmark = pytest.mark.anyio


@pytest.fixture
def otel() -> tuple[OtelExport, InMemorySpanExporter, InMemoryMetricReader]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    export = OtelExport(tracer_provider, MeterProvider(metric_readers=[reader]))
    return export, spans, reader


def metrics(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    out: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out[metric.name] = list(metric.data.data_points)
    return out


SYSTEM = {"role": "system", "content": "You are careful. " * 400}


async def test_one_span_per_call_with_genai_names_and_metrics(
    otel: tuple[OtelExport, InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    export, spans, reader = otel
    fake = FakeCompletion(
        text("a", usage=usage(2000, 5, cached_tokens=0)),
        text("b", usage=usage(2100, 7, cached_tokens=1920)),
    )
    session = ctxmw.Session(
        "openai/gpt-4o",
        system=SYSTEM["content"],
        completion=fake,
        on_call=[export],
        prompt_strategies="none",
        session="conv-1",
    )
    await session.ask("one")
    await session.ask("two")
    finished = spans.get_finished_spans()
    assert [s.name for s in finished] == ["chat openai/gpt-4o"] * 2
    attrs = dict(finished[1].attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == "openai/gpt-4o"
    assert attrs["gen_ai.conversation.id"] == "conv-1"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (2100, 7)
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 1920
    assert "gen_ai.usage.cache_creation.input_tokens" not in attrs  # OpenAI reports no writes
    assert attrs["ctxmw.expected_cached_tokens"] > 0
    assert attrs["ctxmw.cache_rule"] == "openai"
    assert finished[1].end_time is not None
    assert finished[1].start_time is not None
    assert finished[1].end_time >= finished[1].start_time
    got = metrics(reader)
    tokens = {(p.attributes["gen_ai.token.type"], p.sum) for p in got["gen_ai.client.token.usage"]}
    assert tokens == {("input", 4100), ("output", 12)}
    assert [p.value for p in got["ctxmw.cache.read.tokens"]] == [1920]
    assert sum(p.value for p in got["ctxmw.prompt.tokens"]) == 4100
    assert got["gen_ai.client.operation.duration"][0].count == 2


async def test_busts_and_alerts_become_counters_and_span_events(
    otel: tuple[OtelExport, InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    export, spans, reader = otel
    recorder = CallRecorder("s", on_call=[export], token_counter=ApproxCounter())
    msgs = [SYSTEM, {"role": "user", "content": "hi"}]
    for n in range(2):
        tools = [{"type": "function", "function": {"name": f"tool{n}", "parameters": {}}}]
        await recorder.record(
            model="gpt-4o", wire_kwargs={"model": "gpt-4o", "messages": msgs, "tools": tools},
            transcript=msgs, response={"usage": {"prompt_tokens": 900, "completion_tokens": 1}},
        )  # fmt: skip
    second = spans.get_finished_spans()[1]
    assert dict(second.attributes or {})["ctxmw.bust.cause"] == "tools"
    assert "gen_ai.usage.cache_read.input_tokens" not in dict(second.attributes or {})
    events = [(e.name, dict(e.attributes or {})["ctxmw.alert.rule"]) for e in second.events]
    assert events == [("ctxmw.alert", "bust_tools")]
    got = metrics(reader)
    assert [
        (dict(p.attributes)["ctxmw.bust.cause"], p.value) for p in got["ctxmw.cache.busts"]
    ] == [("tools", 1)]
    assert [(dict(p.attributes)["ctxmw.alert.rule"], p.value) for p in got["ctxmw.alerts"]] == [
        ("bust_tools", 1)
    ]
    assert "ctxmw.cache.read.tokens" not in got  # nothing reported: nothing counted as 0
    reported = {
        dict(p.attributes)["ctxmw.cache.reported"]: p.value for p in got["ctxmw.prompt.tokens"]
    }
    assert reported == {False: 1800}


async def test_off_unless_configured_and_the_setting_uses_the_global_providers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert CallRecorder("s")._otel == ()
    from opentelemetry import trace

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    recorder = CallRecorder("s", settings=Settings(otel=True), token_counter=ApproxCounter())
    kwargs = {"model": "gpt-4o", "messages": [SYSTEM]}
    await recorder.record(model="gpt-4o", wire_kwargs=kwargs, transcript=[SYSTEM])
    assert len(exporter.get_finished_spans()) == 1


def test_without_the_api_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(UsageError, match=r"pip install opentelemetry-api \(in a ctxmw checkout"):
        OtelExport()
