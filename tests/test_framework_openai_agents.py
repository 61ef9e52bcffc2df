"""ctxmw inside openai-agents (``LitellmModel``), offline against the scripted provider."""

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

agents = pytest.importorskip("agents")
litellm_model = pytest.importorskip("agents.extensions.models.litellm_model")

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # the framework runs: the slow tier


@agents.function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    agents.set_tracing_disabled(True)  # traces would be exported to OpenAI's servers


def make_agent(
    base: str, save_file: Path, name: str = "calc", tools: Any = (add,), **options: Any
) -> Any:
    model = litellm_model.LitellmModel(model=MODEL, base_url=base, api_key="scripted")
    options = {"save_file": str(save_file), "prompt_strategies": ["none"], **options}
    settings = agents.ModelSettings(extra_args=options)
    return agents.Agent(
        name=name, instructions="Be brief.", model=model, tools=list(tools), model_settings=settings
    )


async def test_a_multi_turn_agent_with_tools(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    async with scripted_provider() as (server, base):
        agent = make_agent(base, save_file)
        with calls_through() as passed:
            first = await agents.Runner.run(agent, "Add 2 and 2.")
            history = [*first.to_input_list(), {"role": "user", "content": "And again?"}]
            second = await agents.Runner.run(agent, history)
    assert first.final_output == "Done: 4"
    assert second.final_output == "Done: 4"
    assert len(server.requests) == 4
    await assert_faithful(server, passed, save_file)


async def test_a_turn_retried_after_a_provider_error(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    async with scripted_provider() as (server, base):
        agent = make_agent(base, save_file)
        with calls_through() as passed:
            first = await agents.Runner.run(agent, "Add 2 and 2.")
            turn = [*first.to_input_list(), {"role": "user", "content": "Add 3 and 3."}]
            server.fail(1, after=1)  # the call after the turn's tool round fails...
            with pytest.raises(Exception, match="scripted failure"):
                await agents.Runner.run(agent, turn)
            again = await agents.Runner.run(agent, turn)  # ...and the turn is run again
    assert again.final_output == "Done: 4"
    assert len(server.requests) == 6
    # The re-run starts from the caller's history: the failed round is not slipped back in.
    assert server.prompts[4] == server.prompts[2]
    await assert_faithful(server, passed, save_file)


async def test_streaming(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    async with scripted_provider() as (server, base):
        agent = make_agent(base, save_file)
        with calls_through() as passed:
            result = agents.Runner.run_streamed(agent, "Add 2 and 2.")
            events = [event async for event in result.stream_events()]
    assert events
    assert result.final_output == "Done: 4"
    assert all(r.get("stream") for r in server.requests)
    await assert_faithful(server, passed, save_file)


async def test_two_agents_concurrently(tmp_path: Path) -> None:
    async def run(base: str, name: str, save_file: Path) -> str:
        agent = make_agent(base, save_file, name)
        return str((await agents.Runner.run(agent, f"{name}: add 2 and 2.")).final_output)

    await assert_two_agents_run_concurrently(tmp_path, run, "Done: 4")


@pytest.mark.usefixtures("shortening_tiers")
async def test_a_long_run_is_shortened_and_keeps_every_promise(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    counter = itertools.count(1)

    @agents.function_tool
    def read_log(path: str) -> str:
        """Read a log file."""
        return big_result(next(counter))

    async with scripted_provider(ScriptedProvider(tool_rounds=CALLS - 1)) as (server, base):
        agent = make_agent(base, save_file, tools=[read_log], prompt_strategies=None)
        with calls_through() as passed:
            await agents.Runner.run(agent, "Find the error in the logs.", max_turns=CALLS + 1)
    found = audit(server.prompts, passed)
    assert_kept_promises(found, "openai-agents")
    await assert_one_transcript_that_replays(save_file, passed[-1])
    assert len(ledger_lines(save_file)) == CALLS
