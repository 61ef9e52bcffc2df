"""Read-back under ``patch_litellm``: a LangChain agent (``ChatLiteLLM``) whose model reads an
earlier result back never sees ``ctxmw_expand``; ctxmw answers it and calls the model again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxmw.context._record import handle_for
from ctxmw.context.readback import READBACK_TOOL, READBACK_TOOL_NAME
from ctxmw.demo.scripted import ScriptedProvider
from tests._frameworks import calls_through, normal, scripted_provider
from tests._readback import answered_lines, file_lines, ledger

pytest.importorskip("langchain_litellm")
from tests.test_framework_langchain import agent_turn, make_model, start

pytestmark = pytest.mark.anyio


class ReadingProvider(ScriptedProvider):
    """The scripted model, which reads the first tool result back before it answers, and then
    answers with the line it got: ``Done: <line>``."""

    def reply(self, request: Any) -> dict[str, Any]:
        messages = list(request.get("messages") or [])
        last = messages[-1] if messages else {}
        if str(last.get("tool_call_id", "")).startswith("readback_"):
            return {"role": "assistant", "content": f"Done: {answered_lines(last['content'])[0]}"}
        if last.get("role") == "tool":
            first = next(m for m in messages if m.get("role") == "tool")
            handle = handle_for(str(first["tool_call_id"]), str(first["content"]))
            call = {
                "id": f"readback_{len(self.requests)}",
                "type": "function",
                "function": {
                    "name": READBACK_TOOL_NAME,
                    "arguments": json.dumps({"handle": handle, "start": 1, "end": 1}),
                },
            }
            return {"role": "assistant", "content": "", "tool_calls": [call]}
        return super().reply(request)


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
async def test_a_langchain_agent_never_sees_a_read_back(tmp_path: Path, streaming: bool) -> None:
    save_file = tmp_path / "agent.jsonl"
    async with scripted_provider(ReadingProvider()) as (server, base):
        model = make_model(base, save_file, prompt_strategies=None)
        history = start("Add 2 and 2.")
        with calls_through() as passed:
            answer = await agent_turn(model, history, streaming=streaming)
    assert answer == "Done: 4"  # the exact line of the tool's result, read back
    assert len(passed) == 2  # the agent's calls
    assert len(server.requests) == 3  # and the one ctxmw made past the read-back
    assert all(problems == [] for problems in server.problems)
    second, third = server.prompts[1], server.prompts[2]
    assert normal(third[: len(second)]) == normal(second)
    assert [m["role"] for m in third[len(second) :]] == ["assistant", "tool"]
    assert all(r["tools"][-1] == READBACK_TOOL for r in server.requests)
    assert READBACK_TOOL_NAME not in repr(history)
    assert {"ctxmw": "readback", "count": 2} in file_lines(save_file)
    assert [line["readback"] for line in ledger(save_file)] == [False, False, True]
