"""ctxmw inside agno (``agno.models.litellm.LiteLLM``): ``Agent.run`` calls ``litellm.completion``,
``Agent.arun`` ``litellm.acompletion``; ctxmw's options travel in ``metadata=`` (agno sends it as
``extra_body``) or ``request_params=``."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import anyio
import pytest

from ctxmw.demo.scripted import ScriptedProvider
from tests._frameworks import (
    MODEL,
    assert_faithful,
    assert_faithful_sync,
    assert_one_transcript_that_replays_sync,
    calls_through,
    scripted_provider,
    scripted_provider_thread,
)
from tests._long_run import CALLS, assert_kept_promises, audit, big_result, ledger_lines

pytest.importorskip("agno")
from agno.agent import Agent
from agno.models.litellm import LiteLLM

pytestmark = pytest.mark.slow  # the framework runs: the slow tier


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make_agent(base: str, save_file: Path, *, via: str = "metadata", tools: Any = (add,)) -> Agent:
    options = {"ctxmw": {"save_file": str(save_file), "prompt_strategies": "none"}}
    carrier: dict[str, Any] = (
        {"metadata": options} if via == "metadata" else {"request_params": {"metadata": options}}
    )
    model = LiteLLM(id=MODEL, api_base=base, api_key="scripted", **carrier)
    return Agent(model=model, tools=list(tools), instructions="Be brief.", telemetry=False)


@pytest.mark.parametrize("via", ["metadata", "request_params"])
def test_run_sync(tmp_path: Path, via: str) -> None:
    save_file = tmp_path / "agent.jsonl"
    with scripted_provider_thread() as (server, base), calls_through() as passed:
        output = make_agent(base, save_file, via=via).run("Add 2 and 2.")
    assert output.content == "Done: 4"
    assert len(server.requests) == 2
    assert "ctxmw" not in str(server.requests)
    assert_faithful_sync(server, passed, save_file)


@pytest.mark.parametrize("via", ["metadata", "request_params"])
@pytest.mark.anyio
async def test_arun(tmp_path: Path, via: str) -> None:
    save_file = tmp_path / "agent.jsonl"
    async with scripted_provider() as (server, base):
        with calls_through() as passed:
            output = await make_agent(base, save_file, via=via).arun("Add 2 and 2.")
    assert output.content == "Done: 4"
    assert "ctxmw" not in str(server.requests)
    await assert_faithful(server, passed, save_file)


def test_run_streamed(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    with scripted_provider_thread() as (server, base), calls_through() as passed:
        events = list(make_agent(base, save_file).run("Add 2 and 2.", stream=True))
    assert "".join(str(e.content or "") for e in events if e.event == "RunContent") == "Done: 4"
    assert all(r.get("stream") for r in server.requests)
    assert_faithful_sync(server, passed, save_file)


@pytest.mark.usefixtures("shortening_tiers")
def test_a_long_run_is_shortened_and_keeps_every_promise(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    counter = itertools.count(1)

    def read_log(path: str) -> str:
        """Read a log file."""
        return big_result(next(counter))

    server = ScriptedProvider(tool_rounds=CALLS - 1)
    with scripted_provider_thread(server) as (_, base), calls_through() as passed:
        agent = make_agent(base, save_file, tools=[read_log])
        agent.model.metadata = {"ctxmw": {"save_file": str(save_file)}}  # the default chain
        agent.run("Find the error in the logs.")
    found = audit(server.prompts, passed)
    assert_kept_promises(found, "agno")
    assert_one_transcript_that_replays_sync(save_file, passed[-1])
    assert len(ledger_lines(save_file)) == CALLS


def test_two_agents_in_threads_keep_their_transcripts_apart(tmp_path: Path) -> None:
    outputs: dict[str, str] = {}
    with scripted_provider_thread() as (server, base), calls_through():

        def one(name: str) -> None:
            agent = make_agent(base, tmp_path / name / "agent.jsonl")
            outputs[name] = str(agent.run(f"{name}: add 2 and 2.").content)

        anyio.run(_in_threads, one, ["one", "two"])
    assert outputs == {"one": "Done: 4", "two": "Done: 4"}
    assert all(problems == [] for problems in server.problems)


async def _in_threads(fn: Any, names: list[str]) -> None:
    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(anyio.to_thread.run_sync, fn, name)
