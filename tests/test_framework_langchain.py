"""ctxmw inside LangChain through langchain-litellm (``ChatLiteLLM``), offline."""

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

chat_litellm = pytest.importorskip("langchain_litellm")
lc_messages = pytest.importorskip("langchain_core.messages")
lc_tools = pytest.importorskip("langchain_core.tools")

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # the framework runs: the slow tier


@lc_tools.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make_model(base: str, save_file: Path, tool: Any = add, **options: Any) -> Any:
    options = {"save_file": str(save_file), "prompt_strategies": ["none"], **options}
    model = chat_litellm.ChatLiteLLM(
        model=MODEL,
        api_base=base,
        api_key="scripted",
        max_retries=0,
        model_kwargs={"metadata": {"ctxmw": options}},
    )
    return model.bind_tools([tool])


async def agent_turn(
    model: Any, history: list[Any], streaming: bool = False, tool: Any = add
) -> str:
    """A minimal tool loop, as LangChain users write one: call, run the tools, call again."""
    while True:
        if streaming:
            reply = None
            async for chunk in model.astream(history):
                reply = chunk if reply is None else reply + chunk
        else:
            reply = await model.ainvoke(history)
        history.append(reply)
        if not reply.tool_calls:
            return str(reply.content)
        for call in reply.tool_calls:
            result = tool.invoke(call["args"])
            history.append(lc_messages.ToolMessage(content=str(result), tool_call_id=call["id"]))


def start(text: str) -> list[Any]:
    return [lc_messages.SystemMessage("Be brief."), lc_messages.HumanMessage(text)]


async def test_a_multi_turn_agent_with_tools(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    async with scripted_provider() as (server, base):
        model = make_model(base, save_file)
        history = start("Add 2 and 2.")
        with calls_through() as passed:
            assert await agent_turn(model, history) == "Done: 4"
            history.append(lc_messages.HumanMessage("And again?"))
            assert await agent_turn(model, history) == "Done: 4"
    assert len(server.requests) == 4
    await assert_faithful(server, passed, save_file)


async def test_a_turn_retried_after_a_provider_error(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    async with scripted_provider() as (server, base):
        model = make_model(base, save_file)
        history = start("Add 2 and 2.")
        with calls_through() as passed:
            await agent_turn(model, history)
            history.append(lc_messages.HumanMessage("Add 3 and 3."))
            checkpoint = list(history)
            server.fail(1, after=1)  # the call after the turn's tool round fails
            with pytest.raises(Exception, match="scripted failure"):
                await agent_turn(model, history)
            history = checkpoint  # the turn is run again from where it started
            assert await agent_turn(model, history) == "Done: 4"
    assert server.prompts[4] == server.prompts[2]
    await assert_faithful(server, passed, save_file)


async def test_streaming(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    async with scripted_provider() as (server, base):
        model = make_model(base, save_file)
        with calls_through() as passed:
            assert await agent_turn(model, start("Add 2 and 2."), streaming=True) == "Done: 4"
    assert all(r.get("stream") for r in server.requests)
    await assert_faithful(server, passed, save_file)


async def test_two_agents_concurrently(tmp_path: Path) -> None:
    async def run(base: str, name: str, save_file: Path) -> str:
        return await agent_turn(make_model(base, save_file), start(f"{name}: add"))

    await assert_two_agents_run_concurrently(tmp_path, run, "Done: 4")


@pytest.mark.usefixtures("shortening_tiers")
async def test_a_long_run_is_shortened_and_keeps_every_promise(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    counter = itertools.count(1)

    @lc_tools.tool
    def read_log(path: str) -> str:
        """Read a log file."""
        return big_result(next(counter))

    async with scripted_provider(ScriptedProvider(tool_rounds=CALLS - 1)) as (server, base):
        model = make_model(base, save_file, read_log, prompt_strategies=None)
        with calls_through() as passed:
            await agent_turn(model, start("Find the error in the logs."), tool=read_log)
    found = audit(server.prompts, passed)
    assert_kept_promises(found, "langchain")
    await assert_one_transcript_that_replays(save_file, passed[-1])
    assert len(ledger_lines(save_file)) == CALLS
