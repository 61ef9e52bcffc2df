"""``summarize`` inside a Session: its call goes through the session, and reads the agent's cache.

The summary call uses the session's completion function, its connection arguments (``api_base``,
keys) and its telemetry, where the ledger marks it ``"kind": "summary"``. In the cache-aligned
mode (the default) the summary request is the agent's own prompt plus one trailing instruction:
same model, same tools, the same bytes up to the fold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw.strategies import summarize
from ctxmw.strategies.summarize import clear_cache
from ctxmw.telemetry import CallRecord
from ctxmw.testing import FakeCompletion, text, tool_calls
from tests.test_session import MODEL, add

pytestmark = pytest.mark.anyio

OPTIONS: dict[str, Any] = {
    "context_window": 3000,
    "output_reservation": 0,
    "compact_trigger": 0.5,
    "compact_keep_recent": 2,
    "summary_step": 4,
}
FILLER = "the quick brown fox jumps over the lazy dog " * 12


@pytest.fixture(autouse=True)
def _fresh_cache() -> Any:
    clear_cache()
    yield
    clear_cache()


ALIGNED_MARK = "[ctxmw: summary request]"  # ctxmw.strategies.summarize.ALIGNED_MARK


def test_the_mark_is_the_strategys() -> None:
    assert summarize.ALIGNED_MARK == ALIGNED_MARK


def is_summary_request(call: dict[str, Any]) -> bool:
    last = call["messages"][-1]
    return isinstance(last.get("content"), str) and ALIGNED_MARK in last["content"]


def agent(rounds: int) -> Any:
    """A responder: a summary for summary requests, else ``rounds`` tool calls, then an answer."""
    done = 0

    def respond(call: dict[str, Any]) -> Any:
        nonlocal done
        if call["model"] == "cheap-model" or is_summary_request(call):
            return text("## Intent\nAdd numbers.\n## Decisions\nnone")
        done += 1
        if done <= rounds:
            return tool_calls(("add", {"a": done, "b": 1}), content=FILLER)
        return text("all added")

    return respond


def session(tmp_path: Path, fake: FakeCompletion, **options: Any) -> ctxmw.Session:
    records: list[CallRecord] = []
    convo = ctxmw.Session(
        MODEL,
        save_file=tmp_path / "agent.jsonl",
        tools=[add],
        completion=fake,
        prompt_strategies="summarize",
        strategy_options={**OPTIONS, **options},
        api_base="http://127.0.0.1:9/v1",
        api_key="sk-test",
        on_call=[records.append],
    )
    convo.records = records  # type: ignore[attr-defined]
    return convo


async def test_the_summary_call_uses_the_session_completion_kwargs_and_ledger(
    tmp_path: Path,
) -> None:
    fake = FakeCompletion(*[agent(12)] * 40)
    convo = session(tmp_path, fake, summary_mode="cheap", summary_model="cheap-model")
    await convo.ask("Add the numbers, one call at a time. " + FILLER)
    summaries = [c for c in fake.calls if c["model"] == "cheap-model"]
    assert summaries, "the summary call never reached the session's completion function"
    assert {(c["api_base"], c["api_key"]) for c in summaries} == {
        ("http://127.0.0.1:9/v1", "sk-test")
    }
    assert all("tools" not in c for c in summaries)  # the cheap path sends no agent tools
    kinds = [r.kind for r in convo.records]  # type: ignore[attr-defined]
    assert kinds.count("summary") == len(summaries)
    ledger = (tmp_path / "agent.jsonl.ledger.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in ledger]
    assert [e["kind"] for e in entries] == kinds
    assert [e["model"] for e in entries if e["kind"] == "summary"] == ["cheap-model"] * len(
        summaries
    )


async def test_an_aligned_summary_request_is_the_agents_prompt_plus_one(tmp_path: Path) -> None:
    fake = FakeCompletion(*[agent(14)] * 40)
    convo = session(tmp_path, fake)
    await convo.ask("Add the numbers, one call at a time. " + FILLER)
    indexes = [i for i, c in enumerate(fake.calls) if is_summary_request(c)]
    assert len(indexes) >= 2, "expected at least two folds"
    transcript = convo.messages
    for n, i in enumerate(indexes):
        request, before = fake.calls[i], fake.calls[i - 1]
        assert request["model"] == before["model"] == MODEL
        assert request["tools"] == before["tools"]
        assert request["messages"][: len(before["messages"])] == before["messages"]
        # What the agent would send now without the new fold: its last prompt plus the round
        # that followed it, then exactly one instruction.
        p = _position(transcript, before)
        assert request["messages"][len(before["messages"]) : -1] == transcript[p : p + 2], n
        assert request["messages"][-1]["role"] == "user"
    records = convo.records  # type: ignore[attr-defined]
    assert [r.kind for r in records].count("summary") == len(indexes)


def _position(transcript: list[dict[str, Any]], call: dict[str, Any]) -> int:
    """Where, in the transcript, the messages after ``call``'s prompt begin."""
    last = call["messages"][-1]
    return max(i for i, m in enumerate(transcript) if m == last) + 1


async def test_a_summary_never_takes_the_sessions_endpoint_and_key_to_another_provider(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeCompletion(*[agent(12)] * 40)
    convo = session(tmp_path, fake, summary_mode="cheap", summary_model="anthropic/claude-haiku")
    await convo.ask("Add the numbers, one call at a time. " + FILLER)
    cheap = [c for c in fake.calls if c["messages"][0]["role"] == "system"]
    assert cheap, "no summary call was made"
    assert {(c["model"], c["api_base"], c["api_key"]) for c in cheap} == {
        (MODEL, "http://127.0.0.1:9/v1", "sk-test")
    }
    assert "the summary uses 'openai/gpt-4o-mini' instead" in caplog.text


async def test_the_stateless_path_sends_a_summary_to_the_calls_own_deployment(
    tmp_path: Path,
) -> None:
    fake = FakeCompletion(*[agent(12)] * 40)
    await ctxmw.acompletion(
        MODEL,
        [{"role": "user", "content": "Add the numbers, one call at a time. " + FILLER}],
        tools=[add],
        completion=fake,
        prompt_strategies="summarize",
        strategy_options=OPTIONS,
        api_base="http://127.0.0.1:9/v1",
        api_key="sk-test",
    )
    summaries = [c for c in fake.calls if is_summary_request(c)]
    assert summaries
    assert {(c["model"], c["api_base"], c["api_key"]) for c in summaries} == {
        (MODEL, "http://127.0.0.1:9/v1", "sk-test")
    }
