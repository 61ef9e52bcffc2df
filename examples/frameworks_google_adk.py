"""ctxmw inside google-adk: a LiteLlm agent with a tool, two turns, offline.

Run it with ``python examples/frameworks_google_adk.py`` (needs ``pip install -e '.[frameworks]'``
in the ctxmw checkout). A scripted OpenAI-compatible server on 127.0.0.1 plays the model; ctxmw's
options travel in litellm's ``metadata``, which ``LiteLlm`` passes through.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio

import ctxmw  # before the frameworks: it keeps litellm offline (no remote cost-map fetch)

# isort: split
from google.adk.agents import LlmAgent
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import InMemoryRunner
from google.genai import types

from ctxmw.demo.scripted import ScriptedProvider
from ctxmw.runtime.transcript import TranscriptFile


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def ask(runner: InMemoryRunner, session_id: str, text: str) -> str:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    answer = ""
    async for event in runner.run_async(user_id="me", session_id=session_id, new_message=message):
        if event.content and event.content.parts:
            answer = next((p.text for p in event.content.parts if p.text), answer)
    return answer


async def main(save_file: Path) -> None:
    server = ScriptedProvider()
    async with anyio.create_task_group() as tg:
        base = await server.serve(tg)
        model = LiteLlm(
            model="openai/scripted",
            api_base=base,
            api_key="scripted",
            metadata={"ctxmw": {"save_file": str(save_file), "prompt_strategies": ["compact"]}},
        )
        agent = LlmAgent(name="calc", model=model, instruction="Be brief.", tools=[add])
        runner = InMemoryRunner(agent=agent, app_name="calc")
        session = await runner.session_service.create_session(app_name="calc", user_id="me")
        with ctxmw.patch_litellm():
            print(f"Turn 1: {await ask(runner, session.id, 'Add 2 and 2.')}")
            print(f"Turn 2: {await ask(runner, session.id, 'And again?')}")
        tg.cancel_scope.cancel()
    valid = all(problems == [] for problems in server.problems)
    print(f"Model calls: {len(server.requests)}, every prompt valid: {valid}")
    revisions = await TranscriptFile(save_file).revisions()
    print(f"save_file: {len(revisions.current)} messages, {revisions.edits} edits, one file")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(main, Path(tmp) / "calc.jsonl")
