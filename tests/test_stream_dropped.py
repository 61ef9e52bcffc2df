"""A streamed reply the caller drops unfinished: the save_file is given back, nothing is saved.

What a dropped stream had received is not a reply: nothing of it goes in the save_file, a
WARNING says so, and the inbox note it carried goes back to the inbox. Its lock is free as soon
as the stream is collected, for the async, sync and patched paths alike.
"""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import litellm
import pytest

import ctxmw
from ctxmw.demo.scripted import ScriptedProvider
from ctxmw.inbox import deliver
from ctxmw.testing import FakeCompletion, text
from tests._frameworks import scripted_provider_thread
from tests._lock import lock_is_free

MODEL = "openai/gpt-4o-mini"
HISTORY = [{"role": "user", "content": "Hi"}]


def roles(save_file: Path) -> list[str]:
    return [json.loads(line)["role"] for line in save_file.read_text().splitlines()]


async def open_stream(save_file: Path, **options: Any) -> Any:
    fake = FakeCompletion(text("a reply in several chunks"))
    return await ctxmw.acompletion(
        MODEL, HISTORY, save_file=save_file, stream=True, completion=fake, **options
    )


async def settle() -> None:
    """Let the loop run the dropped stream's closing task."""
    for _ in range(20):
        await anyio.sleep(0.01)


@pytest.mark.anyio
@pytest.mark.parametrize("read", [0, 1])
async def test_a_dropped_stream_frees_the_save_file_and_saves_nothing(
    tmp_path: Path, read: int, caplog: pytest.LogCaptureFixture
) -> None:
    save_file = tmp_path / "agent.jsonl"
    stream = await open_stream(save_file, prompt_strategies="none")
    for _ in range(read):
        await stream.__anext__()
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        del stream
        gc.collect()
    assert lock_is_free(save_file)  # at once, before any await
    warning = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(warning) == 1
    assert str(save_file) in warning[0]
    assert "nothing of it was saved" in warning[0]
    await settle()
    reply = await ctxmw.acompletion(
        MODEL, HISTORY, save_file=save_file, completion=FakeCompletion(text("whole"))
    )
    assert reply.choices[0].message.content == "whole"
    assert roles(save_file) == ["user", "assistant"]  # only the whole reply


@pytest.mark.anyio
async def test_a_dropped_streams_inbox_note_is_delivered_again(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    await deliver(save_file, "NOTE")
    stream = await open_stream(save_file, prompt_strategies="inbox")
    await stream.__anext__()
    del stream
    gc.collect()
    await settle()
    fake = FakeCompletion(text("ok"))
    await ctxmw.acompletion(
        MODEL, HISTORY, save_file=save_file, completion=fake, prompt_strategies="inbox"
    )
    assert fake.prompts[-1][-1] == {"role": "user", "content": "NOTE"}


@pytest.fixture
def provider() -> Iterator[tuple[ScriptedProvider, str]]:
    with scripted_provider_thread() as served:
        yield served


def test_a_dropped_sync_stream_frees_the_save_file(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    _, base = provider
    save_file = tmp_path / "agent.jsonl"
    options: dict[str, Any] = {"api_base": base, "api_key": "k", "prompt_strategies": "none"}
    stream = ctxmw.completion(MODEL, HISTORY, stream=True, save_file=save_file, **options)
    next(stream)
    del stream
    gc.collect()
    assert lock_is_free(save_file)
    reply = ctxmw.completion(MODEL, HISTORY, save_file=save_file, **options)
    assert reply.choices[0].message.content == "ok"


def test_a_dropped_patched_stream_frees_the_save_file(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    _, base = provider
    save_file = tmp_path / "agent.jsonl"

    async def drop_then_call() -> Any:
        stream = await litellm.acompletion(MODEL, HISTORY, api_base=base, api_key="k", stream=True)
        await stream.__anext__()
        del stream
        gc.collect()
        assert lock_is_free(save_file)
        return await litellm.acompletion(MODEL, HISTORY, api_base=base, api_key="k")

    with ctxmw.patch_litellm(prompt_strategies="none", save_file=str(save_file)):
        sync_stream = litellm.completion(MODEL, HISTORY, api_base=base, api_key="k", stream=True)
        next(sync_stream)
        del sync_stream
        gc.collect()
        assert lock_is_free(save_file)
        reply = anyio.run(drop_then_call)
    assert reply.choices[0].message.content == "ok"
    assert roles(save_file) == ["user", "assistant"]
