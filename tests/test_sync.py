"""``ctxmw.completion``, the synchronous twin, and ``litellm.completion`` under the patch.

The scripted provider runs on an event loop of its own thread, as a real server would: the calls
under test block the thread they are made in.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest

import ctxmw
from ctxmw.demo.scripted import ScriptedProvider
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.testing import FakeCompletion, text
from tests._frameworks import MODEL, normal, scripted_provider_thread
from tests._lock import lock_is_free

HISTORY = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
HANG_GUARD = 120.0  # seconds: only a hang gets anywhere near it


@pytest.fixture
def provider() -> Iterator[tuple[ScriptedProvider, str]]:
    with scripted_provider_thread() as served:
        yield served


def within_guard(work: Callable[[], Any]) -> Any:
    """``work()`` in a daemon thread; a call that never returns fails the test instead of
    hanging the suite."""
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:
            outcome.append((False, exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_GUARD)
    assert outcome, "the call hung"
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def tool_rounds(n: int, result: str) -> list[dict[str, Any]]:
    """``n`` tool calls, each answered by ``result``."""
    rounds: list[dict[str, Any]] = []
    for i in range(n):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        rounds.append({"role": "assistant", "content": "", "tool_calls": [call]})
        rounds.append({"role": "tool", "tool_call_id": f"c{i}", "content": result})
    return rounds


def load(save_file: Path) -> list[dict[str, Any]]:
    return asyncio.run(TranscriptFile(save_file).load())


def test_completion_saves_the_turn_and_its_ledger(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    server, base = provider
    save_file = tmp_path / "agent.jsonl"
    reply = ctxmw.completion(
        MODEL, HISTORY, api_base=base, api_key="k", save_file=save_file, prompt_strategies="none"
    )
    assert reply.choices[0].message.content == "ok"
    assert normal(server.prompts[0]) == normal(HISTORY)
    assert [m["role"] for m in load(save_file)] == ["system", "user", "assistant"]
    assert (tmp_path / "agent.jsonl.ledger.jsonl").read_text().count("\n") == 1
    assert lock_is_free(save_file)


def test_completion_applies_the_strategies(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    server, base = provider
    history = [*HISTORY, *tool_rounds(10, "x" * 4000)]
    ctxmw.completion(
        MODEL,
        [*history, {"role": "user", "content": "go on"}],
        api_base=base,
        api_key="k",
        prompt_strategies=["clear_tool_results"],
        strategy_options={"clear_tool_results_keep": 1, "clear_tool_results_trigger": 0},
    )
    sent = json.dumps(server.prompts[0])
    assert len(sent) < len(json.dumps(history)) / 2
    assert server.problems == [[]]


def test_completion_with_python_tools_runs_the_loop(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    server, base = provider

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    reply = ctxmw.completion(
        MODEL,
        [{"role": "user", "content": "Add 2 and 2."}],
        api_base=base,
        api_key="k",
        tools=[add],
        save_file=tmp_path / "agent.jsonl",
        prompt_strategies="none",
    )
    assert reply.choices[0].message.content == "Done: 4"
    assert len(server.requests) == 2
    assert [m["role"] for m in load(tmp_path / "agent.jsonl")][-3:] == [
        "assistant",
        "tool",
        "assistant",
    ]


def test_a_sync_call_from_inside_a_running_event_loop_works(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    _, base = provider
    save_file = tmp_path / "agent.jsonl"

    async def async_agent() -> Any:
        # A sync tool of an async agent: called on the thread that runs the agent's loop.
        return ctxmw.completion(
            MODEL,
            HISTORY,
            api_base=base,
            api_key="k",
            save_file=save_file,
            prompt_strategies="none",
        )

    reply = within_guard(lambda: asyncio.run(async_agent()))
    assert reply.choices[0].message.content == "ok"
    assert len(load(save_file)) == 3


def test_a_sync_call_on_ctxmws_own_loop_thread_is_a_usage_error() -> None:
    async def provider_call(**kwargs: Any) -> Any:
        # Runs on ctxmw's loop thread: a sync call here would wait for itself.
        return ctxmw.completion(MODEL, HISTORY, completion=FakeCompletion(text("inner")))

    with pytest.raises(ctxmw.UsageError, match=r"await ctxmw\.acompletion"):
        within_guard(lambda: ctxmw.completion(MODEL, HISTORY, completion=provider_call))


def test_calls_from_many_threads_keep_their_conversations_apart(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    _, base = provider

    def agent(name: str) -> None:
        history = [{"role": "user", "content": f"{name}: hi"}]
        for _ in range(3):
            reply = ctxmw.completion(
                MODEL,
                history,
                api_base=base,
                api_key="k",
                save_file=tmp_path / f"{name}.jsonl",
                prompt_strategies="none",
            )
            history = [
                *history,
                reply.choices[0].message.model_dump(),
                {"role": "user", "content": f"{name}: more"},
            ]

    # litellm builds its HTTP client on a first call: one first call alone, or four threads
    # racing to build it would leave the losers' sockets to the garbage collector.
    ctxmw.completion(MODEL, HISTORY, api_base=base, api_key="k", prompt_strategies="none")
    threads = [threading.Thread(target=agent, args=(f"a{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_GUARD)
    for i in range(4):
        messages = load(tmp_path / f"a{i}.jsonl")
        assert len(messages) == 6
        assert all(f"a{i}:" in m["content"] for m in messages if m["role"] == "user")


def test_a_streamed_reply_is_saved_once_read(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    server, base = provider
    save_file = tmp_path / "agent.jsonl"
    stream = ctxmw.completion(
        MODEL,
        HISTORY,
        api_base=base,
        api_key="k",
        stream=True,
        save_file=save_file,
        prompt_strategies="none",
    )
    assert not lock_is_free(save_file)
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "ok"
    assert server.requests[0]["stream"] is True
    assert load(save_file)[-1] == {"role": "assistant", "content": "ok"}
    assert lock_is_free(save_file)


def test_a_stream_closed_early_saves_nothing_and_frees_the_save_file(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    _, base = provider
    save_file = tmp_path / "agent.jsonl"
    with ctxmw.completion(
        MODEL,
        HISTORY,
        api_base=base,
        api_key="k",
        stream=True,
        save_file=save_file,
        prompt_strategies="none",
    ) as stream:
        next(stream)
    assert lock_is_free(save_file)
    assert not save_file.exists() or load(save_file) == []


def test_the_callers_context_reaches_the_hooks(tmp_path: Path) -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("trace", default="none")
    seen: list[str] = []
    var.set("caller's trace")
    ctxmw.completion(
        MODEL,
        HISTORY,
        completion=FakeCompletion(text("ok")),
        prompt_strategies="none",
        on_call=[lambda record: seen.append(var.get())],
    )
    assert seen == ["caller's trace"]


def test_patch_routes_litellm_completion_and_strips_ctxmw_options(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    server, base = provider
    save_file = tmp_path / "agent.jsonl"
    original = litellm.completion
    with ctxmw.patch_litellm(prompt_strategies="none"):
        assert litellm.completion is not original
        reply = litellm.completion(
            model=MODEL,
            messages=HISTORY,
            api_base=base,
            api_key="k",
            metadata={"ctxmw": {"save_file": str(save_file)}},
        )
    assert litellm.completion is original
    assert reply.choices[0].message.content == "ok"
    assert "ctxmw" not in json.dumps(server.requests[0])
    assert len(load(save_file)) == 3


def test_patched_litellm_completion_streams(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    _, base = provider
    save_file = tmp_path / "agent.jsonl"
    with ctxmw.patch_litellm(prompt_strategies="none", save_file=str(save_file)):
        stream = litellm.completion(MODEL, HISTORY, api_base=base, api_key="k", stream=True)
        content = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert content == "ok"
    assert load(save_file)[-1]["content"] == "ok"


def test_patched_acompletion_still_makes_one_provider_call(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    # Both functions are patched: an async call goes through ctxmw once, and one request.
    server, base = provider
    save_file = tmp_path / "agent.jsonl"

    async def call() -> Any:
        return await litellm.acompletion(model=MODEL, messages=HISTORY, api_base=base, api_key="k")

    with ctxmw.patch_litellm(prompt_strategies="none", save_file=str(save_file)):
        asyncio.run(call())
    assert len(server.requests) == 1
    assert len(load(save_file)) == 3


def test_patched_completion_with_acompletion_true_is_the_async_path(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    # litellm.completion(acompletion=True) returns acompletion's coroutine: so does the patch.
    server, base = provider
    save_file = tmp_path / "agent.jsonl"
    with ctxmw.patch_litellm(prompt_strategies="none", save_file=str(save_file)):
        pending = litellm.completion(MODEL, HISTORY, api_base=base, api_key="k", acompletion=True)
        reply = asyncio.run(pending)
    assert reply.choices[0].message.content == "ok"
    assert len(server.requests) == 1
    assert len(load(save_file)) == 3


def test_the_patch_reaches_modules_that_copied_completion(
    provider: tuple[ScriptedProvider, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    import types

    _, base = provider
    agent_module = types.ModuleType("some_sync_agent")
    agent_module.completion = litellm.completion  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "some_sync_agent", agent_module)
    save_file = tmp_path / "agent.jsonl"
    with ctxmw.patch_litellm(prompt_strategies="none", save_file=str(save_file)):
        agent_module.completion(model=MODEL, messages=HISTORY, api_base=base, api_key="k")
    assert agent_module.completion is litellm.completion
    assert save_file.exists()
