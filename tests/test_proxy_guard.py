"""The proxy's failure policy: the shared state before the upstream call, nothing after it.

Before the upstream call a shared state that fails or hangs is answered with HTTP 503 (the
default, ``on_state_error: closed``) or passed through unchanged (``open``). After the provider
answered, nothing ctxmw does (telemetry, the state's commit, metrics, the ledger) turns the
answer into an error: each failure is logged without content and counted.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from ctxmw.state import MemoryState
from ctxmw.testing import text
from tests._fleet_convo import history
from tests.test_proxy_callback import Key, ledger_of, make_hook, scoped, send

pytestmark = pytest.mark.anyio


class BrokenState(MemoryState):
    """A state whose operations fail (``mode="down"``) or never answer (``"hung"``) once
    ``broken`` is set."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode, self.broken = mode, False

    async def _trip(self) -> None:
        if not self.broken:
            return
        if self.mode == "hung":
            await anyio.sleep_forever()
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    async def get(self, key: str) -> str | None:
        await self._trip()
        return await super().get(key)

    async def set(self, key: str, value: str, ttl_s: int = 3600) -> None:
        await self._trip()
        await super().set(key, value, ttl_s)

    async def claim_notes(
        self, conversation: str, claim: str, limit: int | None = None
    ) -> list[Any]:
        await self._trip()
        return await super().claim_notes(conversation, claim, limit)

    async def settle(self, conversation: str, claim: str, requeue: Any = ()) -> None:
        await self._trip()
        await super().settle(conversation, claim, requeue)


def failures(stage: str) -> float:
    registry = pytest.importorskip("prometheus_client").REGISTRY
    return registry.get_sample_value("ctxmw_failures_total", {"stage": stage}) or 0.0


@pytest.mark.parametrize("mode", ["down", "hung"])
async def test_by_default_an_unavailable_state_is_a_503_before_the_upstream(mode: str) -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException

    state = BrokenState(mode)
    hook = make_hook(state, state_timeout=0.2)
    state.broken = True
    before = failures("inbox claim")
    with pytest.raises(HTTPException) as raised:
        await send(hook, history(2))
    assert raised.value.status_code == 503
    assert "did not answer in time" in str(raised.value.detail)
    assert failures("inbox claim") == before + 1


@pytest.mark.parametrize("mode", ["down", "hung"])
async def test_fail_open_sends_the_callers_messages_unchanged(mode: str) -> None:
    state = BrokenState(mode)
    hook = make_hook(state, state_timeout=0.2, on_state_error="open")
    state.broken = True
    prompt, data = await send(hook, history(12))
    assert prompt == history(12)
    assert "spend_logs_metadata" not in data["metadata"]  # nothing recorded for it


@pytest.mark.parametrize("mode", ["down", "hung"])
async def test_a_state_failing_after_the_answer_never_fails_the_call(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    state = BrokenState(mode)
    hook = make_hook(state, state_timeout=0.2)
    await state.push_note(scoped(), "note", "secret note text")
    call_id, request = "after-answer", object()  # the proxy's logging object for it
    data: dict[str, Any] = {
        "model": "agent",
        "messages": history(3),
        "litellm_call_id": call_id,
        "litellm_logging_obj": request,
        "litellm_session_id": "conv",
        "metadata": {},
    }
    await hook.async_pre_call_hook(Key(), None, data, "acompletion")
    kwargs = {"model": "openai/fake-model", "messages": history(3), "litellm_logging_obj": request}
    await hook.async_pre_call_deployment_hook(kwargs, "acompletion")
    state.broken = True  # Redis goes away while the provider answers
    before = failures("telemetry")
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        with anyio.fail_after(60):
            await hook.async_post_call_success_hook(data, Key(), text("ok"))
    assert failures("telemetry") == before + 1
    assert "telemetry failed" in caplog.text
    assert "secret" not in caplog.text
    assert "Connection refused" not in caplog.text


async def test_an_answer_without_cache_figures_is_recorded_and_counted(tmp_path: Path) -> None:
    # Most self-hosted servers report no cache reads at all: usage without its details.
    pytest.importorskip("prometheus_client")
    ledger = tmp_path / "{replica}.jsonl"
    hook = make_hook(MemoryState(), ledger=str(ledger), replica="r1")
    call_id, request = "no-cache-figures", object()  # the proxy's logging object for it
    data: dict[str, Any] = {
        "model": "agent",
        "messages": history(2),
        "litellm_call_id": call_id,
        "litellm_logging_obj": request,
        "litellm_session_id": "conv",
    }
    await hook.async_pre_call_hook(Key(), None, data, "acompletion")
    kwargs = {"model": "openai/fake-model", "messages": history(2), "litellm_logging_obj": request}
    await hook.async_pre_call_deployment_hook(kwargs, "acompletion")
    answer = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 1, "total_tokens": 901},
    }
    await hook.async_post_call_success_hook(data, Key(), answer)
    assert ledger_of(data)["cache_read_tokens"] is None
    lines = (tmp_path / "r1.jsonl").read_text().splitlines()
    assert [json.loads(line)["session"] for line in lines] == [scoped()]


class SlowSaves(MemoryState):
    """A state whose writes fail once ``broken`` is set (reads still answer)."""

    broken = False

    async def set(self, key: str, value: str, ttl_s: int = 3600) -> None:
        if self.broken:
            raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        await super().set(key, value, ttl_s)


async def test_measuring_slower_than_the_state_timeout_keeps_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A loaded replica's first call may take seconds to measure (a tokenizer loads); only the
    # shared state's waits are bounded by state_timeout, so the call keeps its ledger line.
    from ctxmw.telemetry.recorder import CallRecorder

    measure = CallRecorder.record

    async def slow(self: CallRecorder, **kwargs: Any) -> Any:
        await anyio.sleep(0.5)
        return await measure(self, **kwargs)

    monkeypatch.setattr(CallRecorder, "record", slow)
    hook = make_hook(
        MemoryState(), state_timeout=0.2, ledger=str(tmp_path / "{replica}.jsonl"), replica="r1"
    )
    before = failures("telemetry")
    _, data = await send(hook, history(2))
    assert ledger_of(data)["round"] == 0
    assert len((tmp_path / "r1.jsonl").read_text().splitlines()) == 1
    assert failures("telemetry") == before


async def test_a_record_the_state_cannot_save_is_still_published_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = SlowSaves()
    hook = make_hook(
        state, state_timeout=0.2, ledger=str(tmp_path / "{replica}.jsonl"), replica="r1"
    )
    await send(hook, history(2))
    state.broken = True  # Redis refuses writes while the second call is measured
    before = failures("telemetry")
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        _, data = await send(hook, history(4))
    assert ledger_of(data)["round"] == 1
    assert len((tmp_path / "r1.jsonl").read_text().splitlines()) == 2
    assert failures("telemetry") == before + 1
    assert "telemetry failed (ConnectionError)" in caplog.text
    assert "Connection refused" not in caplog.text


class HungAfterClaim(MemoryState):
    """Answers the inbox claim at once; then every read, write and settle hangs (counted)."""

    def __init__(self) -> None:
        super().__init__()
        self.hung: list[str] = []
        self.claimed = False

    async def claim_notes(
        self, conversation: str, claim: str, limit: int | None = None
    ) -> list[Any]:
        notes = await super().claim_notes(conversation, claim, limit)
        self.claimed = True
        return notes

    async def _hang(self, what: str) -> None:
        if self.claimed:
            self.hung.append(what)
            await anyio.sleep_forever()

    async def get(self, key: str) -> str | None:
        await self._hang("get")
        return await super().get(key)

    async def set(self, key: str, value: str, ttl_s: int = 3600) -> None:
        await self._hang("set")
        await super().set(key, value, ttl_s)

    async def settle(self, conversation: str, claim: str, requeue: Any = ()) -> None:
        await self._hang("settle")
        await super().settle(conversation, claim, requeue)


async def test_a_slow_state_costs_a_request_its_state_timeout_once_in_all() -> None:
    state = HungAfterClaim()
    hook = make_hook(state, state_timeout=0.3)
    await state.push_note(scoped(), "note", "claimed, then Redis hangs")
    with anyio.fail_after(60):
        prompt, data = await send(hook, history(3))
    assert prompt[-1]["content"] == "claimed, then Redis hangs"
    # The telemetry's read spent what was left of the request's budget: the settle and the
    # telemetry's save were never waited on (each would have waited a whole state_timeout).
    assert state.hung == ["get"]
    assert "spend_logs_metadata" not in data["metadata"]


async def test_a_spent_budget_refuses_at_once_without_calling_the_state() -> None:
    from ctxmw.proxy._guard import StateBudget

    budget, calls = StateBudget(0.05), []

    async def slow() -> None:
        calls.append("slow")
        await anyio.sleep_forever()

    with pytest.raises(TimeoutError):
        await budget.run(slow)
    with pytest.raises(TimeoutError):
        await budget.run(slow)
    assert calls == ["slow"]
    assert budget.left <= 0
