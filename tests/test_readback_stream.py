"""The read-back round of a stream: no ``ctxmw_expand`` delta and no intermediate finish reaches
the caller; its own tool-call deltas assemble into a well-formed message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw._litellm import stream_chunk_builder
from ctxmw.context.readback import READBACK_TOOL_NAME
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.testing import FakeCompletion, readback, text, tool_call, tool_calls
from tests._lock import lock_is_free
from tests._readback import (
    MODEL,
    SMALL,
    TOOL,
    answered_lines,
    file_lines,
    handle_asked,
    handle_of,
    history,
    ledger,
    original,
    reads_shown,
)

pytestmark = pytest.mark.anyio


async def streamed(messages: list[dict[str, Any]], fake: FakeCompletion, **options: Any) -> Any:
    return await ctxmw.acompletion(
        MODEL, messages, tools=[TOOL], completion=fake, stream=True, **options
    )


async def read_all(stream: Any) -> list[Any]:
    return [chunk async for chunk in stream]


def delta_calls(chunks: list[Any]) -> list[Any]:
    return [
        c for chunk in chunks for choice in chunk.choices for c in choice.delta.tool_calls or ()
    ]


def finishes(chunks: list[Any]) -> list[str]:
    return [
        choice.finish_reason for chunk in chunks for choice in chunk.choices if choice.finish_reason
    ]


async def test_a_streamed_read_back_is_answered_and_the_caller_streams_the_final_reply(
    tmp_path: Path,
) -> None:
    save_file = tmp_path / "agent.jsonl"
    messages = history(8)
    fake = FakeCompletion(reads_shown(2, 4), text("done"))
    chunks = await read_all(
        await streamed(messages, fake, save_file=save_file, strategy_options=SMALL)
    )
    assert delta_calls(chunks) == []
    assert finishes(chunks) == ["stop"]
    built = stream_chunk_builder(chunks)
    assert built.choices[0].message.content == "done"
    first, second = fake.prompts
    asked, answer = second[len(first) :]
    lines = original(messages, handle_asked(asked)).splitlines()
    assert answered_lines(answer["content"]) == lines[1:4]
    assert [line["readback"] for line in ledger(save_file)] == [False, True]
    assert {"ctxmw": "readback", "count": 2} in file_lines(save_file)
    assert (await TranscriptFile(save_file).load())[-1]["content"] == "done"
    assert lock_is_free(save_file)


async def test_text_before_a_read_back_reaches_the_caller_before_the_final_reply(
    tmp_path: Path,
) -> None:
    messages = history(3)
    asks = tool_calls(readback(handle_of(messages, "c1"), 1, 1), content="Let me look. ")
    fake = FakeCompletion(asks, text("It is line 1.0."))
    save_file = tmp_path / "agent.jsonl"
    chunks = await read_all(await streamed(messages, fake, save_file=save_file))
    built = stream_chunk_builder(chunks)
    assert built.choices[0].message.content == "Let me look. It is line 1.0."
    assert built.choices[0].message.tool_calls in (None, [])
    assert (await TranscriptFile(save_file).load())[-1]["content"] == "Let me look. It is line 1.0."


async def test_own_calls_beside_a_read_back_keep_well_formed_indices(tmp_path: Path) -> None:
    messages = history(3)
    mixed = tool_calls(
        readback(handle_of(messages, "c1"), 1, 1, id="rb1"),
        tool_call("read", {"n": 7}, id="own1"),
        tool_call("read", {"n": 8}, id="own2"),
    )
    fake = FakeCompletion(mixed)
    chunks = await read_all(await streamed(messages, fake, save_file=tmp_path / "a.jsonl"))
    assert [c.index for c in delta_calls(chunks)] == [0, 1]
    assert finishes(chunks) == ["tool_calls"]
    built = stream_chunk_builder(chunks).choices[0].message
    assert [(c.id, json.loads(c.function.arguments)) for c in built.tool_calls] == [
        ("own1", {"n": 7}),
        ("own2", {"n": 8}),
    ]
    assert READBACK_TOOL_NAME not in str(chunks)
    splice = file_lines(tmp_path / "a.jsonl")
    assert {"ctxmw": "readback", "count": 2, "splice": True} in splice


async def test_an_abandoned_stream_gives_the_save_file_back(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(reads_shown(1, 1), text("done"))
    stream = await streamed(history(8), fake, save_file=save_file, strategy_options=SMALL)
    await stream.__anext__()
    await stream.__anext__()  # the read-back answered: the second call's stream is being read
    assert len(fake.calls) == 2
    await stream.aclose()
    assert lock_is_free(save_file)
    assert not save_file.exists() or (await TranscriptFile(save_file).load()) == []
    assert [line["readback"] for line in ledger(save_file)] == [False]  # the call that ended
