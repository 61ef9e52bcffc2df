"""ctxmw inside LangChain: ChatLiteLLM (langchain-litellm) with a tool, two turns, offline.

Run it with ``python examples/frameworks_langchain.py`` (needs ``pip install -e '.[frameworks]'`` in
the ctxmw checkout). A scripted OpenAI-compatible server on 127.0.0.1 plays the model; ctxmw's
options travel in ``model_kwargs={"metadata": {"ctxmw": ...}}``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio

import ctxmw  # before the frameworks: it keeps litellm offline (no remote cost-map fetch)

# isort: split
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_litellm import ChatLiteLLM

from ctxmw.demo.scripted import ScriptedProvider
from ctxmw.runtime.transcript import TranscriptFile


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def turn(model: Any, history: list[Any]) -> str:
    """Call the model, run the tools it asks for, until it answers."""
    while True:
        reply = await model.ainvoke(history)
        history.append(reply)
        if not reply.tool_calls:
            return str(reply.content)
        for call in reply.tool_calls:
            history.append(ToolMessage(str(add.invoke(call["args"])), tool_call_id=call["id"]))


async def main(save_file: Path) -> None:
    server = ScriptedProvider()
    async with anyio.create_task_group() as tg:
        base = await server.serve(tg)
        model = ChatLiteLLM(
            model="openai/scripted",
            api_base=base,
            api_key="scripted",
            model_kwargs={"metadata": {"ctxmw": {"save_file": str(save_file)}}},
        ).bind_tools([add])
        history: list[Any] = [SystemMessage("Be brief."), HumanMessage("Add 2 and 2.")]
        with ctxmw.patch_litellm(prompt_strategies=["compact"]):
            print(f"Turn 1: {await turn(model, history)}")
            history.append(HumanMessage("And again?"))
            print(f"Turn 2: {await turn(model, history)}")
        tg.cancel_scope.cancel()
    valid = all(problems == [] for problems in server.problems)
    print(f"Model calls: {len(server.requests)}, every prompt valid: {valid}")
    revisions = await TranscriptFile(save_file).revisions()
    print(f"save_file: {len(revisions.current)} messages, {revisions.edits} edits, one file")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(main, Path(tmp) / "calc.jsonl")
