"""ctxmw inside google-adk (``LiteLlm``), offline against the scripted provider."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from ctxmw.demo.scripted import ScriptedProvider
from tests._frameworks import (
    MODEL,
    assert_faithful,
    assert_one_transcript_that_replays,
    assert_two_agents_run_concurrently,
    calls_through,
    scripted_provider,
)
from tests._long_run import CALLS, assert_kept_promises, audit, big_result, ledger_lines

adk_agents = pytest.importorskip("google.adk.agents")
adk_lite_llm = pytest.importorskip("google.adk.models.lite_llm")
adk_runners = pytest.importorskip("google.adk.runners")
adk_run_config = pytest.importorskip("google.adk.agents.run_config")
genai_types = pytest.importorskip("google.genai.types")

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # the framework runs: the slow tier

ANSWER = 'Done: {"result": 4}'  # ADK wraps a tool's return value


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make_runner(
    base: str, save_file: Path, name: str = "calc", tools: Any = (add,), **options: Any
) -> Any:
    options = {"save_file": str(save_file), "prompt_strategies": ["none"], **options}
    model = adk_lite_llm.LiteLlm(
        model=MODEL,
        api_base=base,
        api_key="scripted",
        # ctxmw's options travel in litellm's metadata, which LiteLlm passes through.
        metadata={"ctxmw": options},
    )
    agent = adk_agents.LlmAgent(name=name, model=model, instruction="Be brief.", tools=list(tools))
    return adk_runners.InMemoryRunner(agent=agent, app_name=name)


async def ask(runner: Any, session_id: str, text: str, streaming: bool = False) -> str:
    message = genai_types.Content(role="user", parts=[genai_types.Part(text=text)])
    mode = adk_run_config.StreamingMode.SSE if streaming else adk_run_config.StreamingMode.NONE
    config = adk_run_config.RunConfig(streaming_mode=mode)
    texts: list[str] = []
    async for event in runner.run_async(
        user_id="u", session_id=session_id, new_message=message, run_config=config
    ):
        if event.content and event.content.parts and not event.partial:
            texts += [p.text for p in event.content.parts if p.text]
    return texts[-1] if texts else ""


async def new_session(runner: Any) -> str:
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    return str(session.id)


async def test_a_multi_turn_agent_with_tools(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    async with scripted_provider() as (server, base):
        runner = make_runner(base, save_file)
        session = await new_session(runner)
        with calls_through() as passed:
            assert await ask(runner, session, "Add 2 and 2.") == ANSWER
            assert await ask(runner, session, "And again?") == ANSWER
    assert len(server.requests) == 4
    await assert_faithful(server, passed, save_file)


async def test_a_turn_retried_after_a_provider_error(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    async with scripted_provider() as (server, base):
        runner = make_runner(base, save_file)
        session = await new_session(runner)
        with calls_through() as passed:
            await ask(runner, session, "Add 2 and 2.")
            server.fail(1, after=1)  # the call after the next turn's tool round fails
            with pytest.raises(Exception, match="scripted failure"):
                await ask(runner, session, "Add 3 and 3.")
            # A fresh session replays the turn: the caller's history is what ADK holds now.
            retry = await new_session(runner)
            assert await ask(runner, retry, "Add 3 and 3.") == ANSWER
    await assert_faithful(server, passed, save_file)


async def test_streaming(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    async with scripted_provider() as (server, base):
        runner = make_runner(base, save_file)
        session = await new_session(runner)
        with calls_through() as passed:
            assert await ask(runner, session, "Add 2 and 2.", streaming=True) == ANSWER
    assert all(r.get("stream") for r in server.requests)
    await assert_faithful(server, passed, save_file)


async def test_two_agents_concurrently(tmp_path: Path) -> None:
    async def run(base: str, name: str, save_file: Path) -> str:
        runner = make_runner(base, save_file, name)
        return await ask(runner, await new_session(runner), f"{name}: add")

    await assert_two_agents_run_concurrently(tmp_path, run, ANSWER)


@pytest.mark.usefixtures("shortening_tiers")
async def test_a_long_run_is_shortened_and_keeps_every_promise(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    counter = itertools.count(1)

    def read_log(path: str) -> str:
        """Read a log file."""
        return big_result(next(counter))

    async with scripted_provider(ScriptedProvider(tool_rounds=CALLS - 1)) as (server, base):
        runner = make_runner(base, save_file, tools=[read_log], prompt_strategies=None)
        with calls_through() as passed:
            await ask(runner, await new_session(runner), "Find the error in the logs.")
    found = audit(server.prompts, passed)
    assert_kept_promises(found, "google-adk")
    await assert_one_transcript_that_replays(save_file, passed[-1])
    assert len(ledger_lines(save_file)) == CALLS
