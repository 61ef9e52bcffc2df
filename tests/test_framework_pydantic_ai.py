"""ctxmw inside pydantic-ai through pydantic-ai-litellm (``LiteLLMModel``, which copied
``litellm.acompletion`` at import), offline against the scripted provider; ctxmw's options
travel in ``litellm_metadata``."""

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

pytest.importorskip("pydantic_ai_litellm")
from pydantic_ai import Agent
from pydantic_ai.usage import UsageLimits
from pydantic_ai_litellm import LiteLLMModel, LiteLLMModelSettings

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # the framework runs: the slow tier


def make_agent(base: str, save_file: Path, tools: list[Any], **ctxmw_options: Any) -> Agent:
    options = {"save_file": str(save_file), **ctxmw_options}
    settings = LiteLLMModelSettings(litellm_metadata={"ctxmw": options})
    model = LiteLLMModel(MODEL, api_base=base, api_key="scripted", settings=settings)
    return Agent(model, tools=tools, instructions="Be brief.")


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_a_multi_turn_agent_with_tools(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    async with scripted_provider() as (server, base):
        agent = make_agent(base, save_file, [add], prompt_strategies="none")
        with calls_through() as passed:
            first = await agent.run("Add 2 and 2.")
            second = await agent.run("And again?", message_history=first.all_messages())
    assert first.output == "Done: 4"
    assert second.output == "Done: 4"
    assert len(server.requests) == 4
    assert "ctxmw" not in str(server.requests)
    await assert_faithful(server, passed, save_file)


@pytest.mark.usefixtures("shortening_tiers")
async def test_a_long_run_is_shortened_and_keeps_every_promise(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    counter = itertools.count(1)

    def read_log(path: str) -> str:
        """Read a log file."""
        return big_result(next(counter))

    async with scripted_provider(ScriptedProvider(tool_rounds=CALLS - 1)) as (server, base):
        agent = make_agent(base, save_file, [read_log])
        with calls_through() as passed:
            limits = UsageLimits(request_limit=CALLS)  # pydantic-ai stops at 50 requests
            await agent.run("Find the error in the logs.", usage_limits=limits)
    found = audit(server.prompts, passed)
    assert_kept_promises(found, "pydantic-ai-litellm")
    await assert_one_transcript_that_replays(save_file, passed[-1])
    assert len(ledger_lines(save_file)) == CALLS
