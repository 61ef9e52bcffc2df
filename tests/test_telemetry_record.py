"""CallRecorder and its sinks: ledger beside the save_file, INFO line, hooks; no content."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path
from typing import Any

import pytest

from ctxmw.settings import Settings
from ctxmw.telemetry import ApproxCounter, CallRecord, CallRecorder, ledger_path
from ctxmw.telemetry.counters import template_tools_tokens
from tests import _provider_bodies as bodies

LEDGER_KEYS = {
    "ts", "session", "call", "round", "model", "provider", "cache_rule", "strategies",
    "messages_in", "messages_out", "calls_compacted", "calls_dropped", "epoch",
    "prompt_tokens_local", "prefix_tokens_local", "expected_cached_tokens", "prompt_tokens",
    "cache_read_tokens", "cache_write_tokens", "completion_tokens", "usage_estimated", "cost_usd",
    "latency_s", "bust", "payload_digest", "budget", "kind", "cache_marks", "prompt_cache_key",
    "alerts", "readback",
}  # fmt: skip
SECRET = "sk-live-SECRET-tool-output"


def test_ledger_path_beside_the_save_file() -> None:
    assert ledger_path("dir/agent.jsonl") == Path("dir/agent.jsonl.ledger.jsonl")
    assert ledger_path("dir/a.b.jsonl") == Path("dir/a.b.jsonl.ledger.jsonl")
    assert ledger_path("dir/agent") == Path("dir/agent.ledger.jsonl")
    assert ledger_path("dir/agent.json") == Path("dir/agent.json.ledger.jsonl")


async def _two_calls(recorder: CallRecorder) -> list[CallRecord]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "sys " * 1500},
        {"role": "user", "content": f"token {SECRET}"},
    ]
    records = []
    for n in range(2):
        kwargs = {"model": "gpt-4o", "messages": msgs}
        stats = {
            "shorten_tools_epoch_increment": {"epoch": 3, "calls_compacted": 4, "calls_dropped": 2}
        }
        records.append(
            await recorder.record(
                model="gpt-4o", wire_kwargs=kwargs, transcript=msgs, trace=[("x", msgs)],
                stats=stats, response=bodies.OPENAI, latency_s=0.25, round=n,
            )
        )  # fmt: skip
        msgs = [*msgs, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    return records


@pytest.mark.anyio
async def test_records_reach_the_ledger_the_logger_and_hooks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[CallRecord] = []

    async def async_hook(record: CallRecord) -> None:
        seen.append(record)

    recorder = CallRecorder(
        str(tmp_path / "agent.jsonl"),
        save_file=tmp_path / "agent.jsonl",
        settings=Settings(),
        on_call=[seen.append, async_hook],
        token_counter=ApproxCounter(),
    )
    with caplog.at_level(logging.INFO, logger="ctxmw"):
        records = await _two_calls(recorder)
    assert seen == [records[0], records[0], records[1], records[1]]
    lines = (tmp_path / "agent.jsonl.ledger.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [r.to_dict() for r in records]
    assert set(json.loads(lines[0])) == LEDGER_KEYS
    assert SECRET not in "".join(lines)
    assert stat.S_IMODE((tmp_path / "agent.jsonl.ledger.jsonl").stat().st_mode) == 0o600
    info = [r.getMessage() for r in caplog.records if r.name == "ctxmw"]
    assert len(info) == 2
    assert info[0].startswith("ctxmw call 1 session=")
    assert "read=1920 expected=1408 prefix_local=" in info[1]
    assert "hit=95.7% so far" in info[1]
    assert [r.call for r in records] == [1, 2]


@pytest.mark.anyio
async def test_the_ledger_holds_what_was_measured_whatever_a_hook_does(tmp_path: Path) -> None:
    """The line is built before the hooks run: a hook editing the record's budget dict (the
    one mutable field) changes nothing on disk."""

    def meddle(record: CallRecord) -> None:
        assert record.budget is not None
        record.budget["tools"] = -1

    recorder = CallRecorder(
        "s", save_file=tmp_path / "a.jsonl", on_call=[meddle], token_counter=ApproxCounter()
    )
    records = await _two_calls(recorder)
    lines = (tmp_path / "a.jsonl.ledger.jsonl").read_text().splitlines()
    assert [json.loads(line)["budget"]["tools"] for line in lines] == [0, 0]
    assert [r.budget["tools"] for r in records if r.budget] == [-1, -1]


@pytest.mark.anyio
async def test_record_fields(tmp_path: Path) -> None:
    records = await _two_calls(CallRecorder("s", token_counter=ApproxCounter()))
    first, second = records
    assert (second.provider, second.cache_rule, second.strategies) == ("openai", "openai", ("x",))
    assert (second.cache_read_tokens, second.prompt_tokens, second.usage_estimated) == (
        1920,
        2006,
        False,
    )
    assert (second.epoch, second.calls_compacted, second.calls_dropped) == (3, 4, 2)
    assert (first.prefix_tokens_local, first.bust) == (0, None)
    assert second.prefix_tokens_local > 0
    assert second.bust is None
    assert second.expected_cached_tokens == second.prefix_tokens_local // 128 * 128
    assert second.cost_usd is not None
    assert second.cost_usd > 0
    assert second.messages_in == second.messages_out == 4


@pytest.mark.anyio
async def test_a_failing_hook_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def bad(record: CallRecord) -> None:
        raise RuntimeError("boom")

    recorder = CallRecorder("s", on_call=[bad], token_counter=ApproxCounter())
    with caplog.at_level(logging.ERROR, logger="ctxmw"):
        await _two_calls(recorder)
    assert any("hook" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_missing_usage_falls_back_to_the_local_count() -> None:
    recorder = CallRecorder("s", token_counter=ApproxCounter())
    msgs = [{"role": "user", "content": "hello there"}]
    record = await recorder.record(
        model="gpt-4o", wire_kwargs={"messages": msgs}, transcript=msgs, response=None
    )
    assert record.usage_estimated
    assert record.prompt_tokens == record.prompt_tokens_local > 0
    assert record.cost_usd is None


@pytest.mark.anyio
async def test_a_self_hosted_endpoint_counts_the_tools_as_its_template_writes_them() -> None:
    from tests._synthetic import TOOLS

    msgs: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    counts = []
    for api_base in ("https://api.openai.com/v1", "http://127.0.0.1:8011/v1"):
        recorder = CallRecorder("s", token_counter=ApproxCounter())
        kwargs = {"model": "openai/m", "messages": msgs, "tools": TOOLS, "api_base": api_base}
        record = await recorder.record(model="openai/m", wire_kwargs=kwargs, transcript=msgs)
        counts.append((record.cache_rule, record.budget["tools"]))
    (official, official_tools), (hosted, hosted_tools) = counts
    assert (official, hosted) == ("openai", "exact")
    assert hosted_tools == template_tools_tokens(ApproxCounter(), "openai/m", TOOLS)
    assert hosted_tools != official_tools
