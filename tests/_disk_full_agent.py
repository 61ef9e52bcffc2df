"""A subprocess for tests/test_disk_full.py: conversations on a disk that really fills up.

``RLIMIT_FSIZE`` caps the size of every file this process writes: a write that crosses the cap
writes up to it and returns short, the next one fails with ``EFBIG`` (``SIGXFSZ`` is ignored, so
the process lives on), as on a full disk. Each scenario prints one JSON line of what it saw.

Usage: ``python tests/_disk_full_agent.py FOLDER``
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from collections.abc import Awaitable, Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

import ctxmw
from ctxmw.context.offload import store_dir
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.testing import FakeCompletion, text, tool_calls

MODEL = "openai/gpt-4o-mini"
BIG = "".join(f"row {i:05d} value={i * 7}\n" for i in range(4000))  # about 90 kB
SETTINGS = {"offload_threshold": 500}


@contextmanager
def full_at(size: int) -> Any:
    """Every file of this process is full at ``size`` bytes, until the block ends."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


async def failed(call: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    try:
        await call()
    except ctxmw.SaveFileWriteError as exc:
        return {"error": type(exc).__name__, "what": exc.what, "path": exc.save_file}
    return {"error": None}


def history(call_id: str) -> list[dict[str, Any]]:
    call = {"id": call_id, "type": "function", "function": {"name": "read", "arguments": "{}"}}
    return [
        {"role": "user", "content": "Read the log."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": BIG},
    ]


async def stateless_offload(folder: Path) -> dict[str, Any]:
    """A stateless call offloads a 90 kB result onto a disk full at 40 kB, then space is freed."""
    save_file = folder / "stateless.jsonl"
    messages = history("c1")

    async def call() -> Any:
        return await ctxmw.acompletion(
            MODEL,
            messages,
            save_file=save_file,
            prompt_strategies="offload",
            settings=SETTINGS,
            completion=FakeCompletion(text("read it")),
        )

    with full_at(40_000):
        seen = await failed(call)
    seen["store_after_failure"] = listing(store_dir(save_file))
    seen["save_file_after_failure"] = save_file.exists()
    reply = await call()
    seen["reply"] = reply.choices[0].message.content
    seen["records"] = [json.loads(p.read_text())["content"] == BIG for p in records(save_file)]
    return seen


def records(save_file: Path) -> list[Path]:
    return sorted(p for p in store_dir(save_file).iterdir() if p.suffix == ".json")


async def session_offload(folder: Path) -> dict[str, Any]:
    """A session resumes a saved 90 kB result; its offload write meets a full disk."""
    save_file = folder / "session.jsonl"
    await TranscriptFile(save_file).append(history("c2"))
    fake = FakeCompletion(text("read it"))
    session = ctxmw.Session(
        MODEL, save_file=save_file, completion=fake, offload=True, settings=SETTINGS
    )
    with full_at(40_000):  # the record is written first (before the model call): it fails
        seen = await failed(lambda: session.ask("What does it say?"))
    seen["store_after_failure"] = listing(store_dir(save_file))
    seen["calls_after_failure"] = len(fake.calls)
    reply = await session.run()
    seen["reply"] = reply.choices[0].message.content
    seen["sent_preview"] = fake.prompts[-1][2]["content"].startswith("[ctxmw offload ")
    seen["records"] = [json.loads(p.read_text())["content"] == BIG for p in records(save_file)]
    seen["saved"] = [m["role"] for m in await TranscriptFile(save_file).load()]
    return seen


async def save_file_append(folder: Path) -> dict[str, Any]:
    """A tool round's append crosses the disk's end: the file is cut back, then saved."""
    save_file = folder / "append.jsonl"
    ran: list[int] = []

    def read() -> str:
        """Read the log."""
        ran.append(1)
        return BIG

    fake = FakeCompletion(text("hello"), tool_calls(("read", {})), text("read it"))
    session = ctxmw.Session(MODEL, save_file=save_file, tools=[read], completion=fake)
    await session.ask("Hello.")
    before = save_file.read_bytes()
    with full_at(len(before) + 4096):  # room for part of the round: a short write, then EFBIG
        seen = await failed(lambda: session.ask("Read the log."))
    seen["unchanged_after_failure"] = save_file.read_bytes() == before
    seen["in_memory"] = [m["role"] for m in session.messages]
    reply = await session.run()
    seen["reply"] = reply.choices[0].message.content
    seen["tool_runs"] = len(ran)
    seen["saved"] = [m["role"] for m in await TranscriptFile(save_file).load()]
    return seen


async def main(folder: Path) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap fails, not the process
    for scenario in (stateless_offload, session_offload, save_file_append):
        seen = await scenario(folder)
        print(json.dumps({"scenario": scenario.__name__, **seen}), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    anyio.run(main, Path(sys.argv[1]))
