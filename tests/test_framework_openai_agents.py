"""ctxmw inside openai-agents (``LitellmModel``), offline against the scripted provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tests._frameworks import (
    MODEL,
    assert_model_got_the_callers_messages,
    assert_one_transcript_that_replays,
    calls_through,
    scripted_provider,
)

agents = pytest.importorskip("agents")
litellm_model = pytest.importorskip("agents.extensions.models.litellm_model")

pytestmark = pytest.mark.anyio


@agents.function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    agents.set_tracing_disabled(True)  # traces would be exported to OpenAI's servers


def make_agent(base: str, save_file: Path, name: str = "calc") -> Any:
    model = litellm_model.LitellmModel(model=MODEL, base_url=base, api_key="scripted")
    settings = agents.ModelSettings(
        extra_args={"save_file": str(save_file), "prompt_strategies": ["none"]}
    )
    return agents.Agent(
        name=name, instructions="Be brief.", model=model, tools=[add], model_settings=settings
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
    assert_model_got_the_callers_messages(server, passed)
    await assert_one_transcript_that_replays(save_file, passed[-1])


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
    assert_model_got_the_callers_messages(server, passed)
    await assert_one_transcript_that_replays(save_file, passed[-1])


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
    assert_model_got_the_callers_messages(server, passed)
    await assert_one_transcript_that_replays(save_file, passed[-1])


async def test_two_agents_concurrently(tmp_path: Path) -> None:
    outputs: dict[str, str] = {}
    async with scripted_provider() as (server, base):
        with calls_through() as passed:

            async def run(name: str) -> None:
                agent = make_agent(base, tmp_path / name / "agent.jsonl", name)
                outputs[name] = (
                    await agents.Runner.run(agent, f"{name}: add 2 and 2.")
                ).final_output

            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "one")
                tg.start_soon(run, "two")
    assert outputs == {"one": "Done: 4", "two": "Done: 4"}
    assert all(problems == [] for problems in server.problems)
    assert len(passed) == len(server.requests) == 4
    for name in ("one", "two"):
        mine = [p for p in passed if f"{name}: add" in str(p)]
        await assert_one_transcript_that_replays(tmp_path / name / "agent.jsonl", mine[-1])
