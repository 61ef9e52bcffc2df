"""ctxmw inside strands-agents (``strands.models.litellm.LiteLLMModel``, which calls
``litellm.acompletion``), offline against the scripted provider. Plain ``strands-agents``: its
``[litellm]`` extra pins an older litellm."""

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
    calls_through,
    scripted_provider,
)
from tests._long_run import CALLS, assert_kept_promises, audit, big_result, ledger_lines

pytest.importorskip("strands")
from strands import Agent, tool
from strands.agent.conversation_manager import NullConversationManager
from strands.models.litellm import LiteLLMModel

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # the framework runs: the slow tier


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make_agent(base: str, save_file: Path, tools: list[Any], **ctxmw_options: Any) -> Agent:
    options = {"save_file": str(save_file), **ctxmw_options}
    model = LiteLLMModel(
        client_args={"api_base": base, "api_key": "scripted", "metadata": {"ctxmw": options}},
        model_id=MODEL,
    )
    # ctxmw shortens the prompt; strands' own 40-message window would drop what ctxmw keeps.
    return Agent(
        model=model,
        tools=tools,
        system_prompt="Be brief.",
        conversation_manager=NullConversationManager(),
        callback_handler=None,
    )


async def test_a_multi_turn_agent_with_tools(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    async with scripted_provider() as (server, base):
        agent = make_agent(base, save_file, [add], prompt_strategies="none")
        with calls_through() as passed:
            first = await agent.invoke_async("Add 2 and 2.")
            second = await agent.invoke_async("And again?")
    assert str(first).strip() == "Done: 4"
    assert str(second).strip() == "Done: 4"
    assert len(server.requests) == 4
    assert "ctxmw" not in str(server.requests)
    await assert_faithful(server, passed, save_file)


@pytest.mark.usefixtures("shortening_tiers")
async def test_a_long_run_is_shortened_and_keeps_every_promise(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    counter = itertools.count(1)

    @tool
    def read_log(path: str) -> str:
        """Read a log file."""
        return big_result(next(counter))

    async with scripted_provider(ScriptedProvider(tool_rounds=CALLS - 1)) as (server, base):
        agent = make_agent(base, save_file, [read_log])
        with calls_through() as passed:
            await agent.invoke_async("Find the error in the logs.")
    found = audit(server.prompts, passed)
    assert_kept_promises(found, "strands-agents")
    await assert_one_transcript_that_replays(save_file, passed[-1])
    assert len(ledger_lines(save_file)) == CALLS
