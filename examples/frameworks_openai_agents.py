"""ctxmw inside openai-agents: a LitellmModel agent with a tool, two turns, offline.

Run it with ``python examples/frameworks_openai_agents.py`` (needs ``pip install -e
'.[frameworks]'`` in the ctxmw checkout). A scripted OpenAI-compatible server on 127.0.0.1 plays the
model; point ``base_url`` at your own server (llama.cpp, vLLM, ...) or drop it for the provider's
API.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio

import ctxmw  # before the frameworks: it keeps litellm offline (no remote cost-map fetch)

# isort: split
from agents import Agent, ModelSettings, Runner, function_tool, set_tracing_disabled
from agents.extensions.models.litellm_model import LitellmModel

from ctxmw.demo.scripted import ScriptedProvider
from ctxmw.runtime.transcript import TranscriptFile


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def main(save_file: Path) -> None:
    set_tracing_disabled(True)  # this example stays offline
    server = ScriptedProvider()
    async with anyio.create_task_group() as tg:
        base = await server.serve(tg)
        agent = Agent(
            name="calc",
            instructions="Be brief.",
            model=LitellmModel(model="openai/scripted", base_url=base, api_key="scripted"),
            tools=[add],
            model_settings=ModelSettings(
                extra_args={"save_file": str(save_file), "prompt_strategies": ["compact"]}
            ),
        )
        with ctxmw.patch_litellm():
            first = await Runner.run(agent, "Add 2 and 2.")
            again = [*first.to_input_list(), {"role": "user", "content": "And again?"}]
            second = await Runner.run(agent, again)
        tg.cancel_scope.cancel()
    print(f"Turn 1: {first.final_output}")
    print(f"Turn 2: {second.final_output}")
    valid = all(problems == [] for problems in server.problems)
    print(f"Model calls: {len(server.requests)}, every prompt valid: {valid}")
    revisions = await TranscriptFile(save_file).revisions()
    print(f"save_file: {len(revisions.current)} messages, {revisions.edits} edits, one file")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(main, Path(tmp) / "calc.jsonl")
