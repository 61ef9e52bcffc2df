"""A save_file under faults: a full disk, then a crash that left a tool round open.

1. The disk fills up (for real: a file size limit makes every write past 2 kB fail) while a
   turn saves a tool round: the turn raises SaveFileWriteError naming the file, nothing
   half-written is left, the round stays in memory. Space is freed; ``run()`` saves it and
   goes on, without running the tool again.
2. A crash cut the file right after an assistant line asking for a tool: the next turn sets that
   round aside (kept in the file, not sent, its tool not run again) and asks the model again.

Run it: ``python examples/save_file_faults.py`` (offline, a scripted model).
"""

from __future__ import annotations

import json
import resource
import signal
import tempfile
from pathlib import Path

import anyio

from ctxmw import SaveFileWriteError, Session
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.testing import FakeCompletion, text, tool_calls

MODEL = "openai/gpt-4o-mini"
LOG = "".join(f"12:00:{i % 60:02d} worker {i} ok\n" for i in range(400))  # about 10 kB


async def full_disk(folder: Path) -> None:
    save_file = folder / "agent.jsonl"
    ran: list[str] = []

    def read_log() -> str:
        """Read the server log."""
        ran.append("read_log")
        return LOG

    fake = FakeCompletion(tool_calls(("read_log", {})), text("The log is fine."))
    session = Session(MODEL, save_file=save_file, tools=[read_log], completion=fake)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, hard))  # the "disk" holds 2 kB a file
    try:
        await session.ask("Is the log fine?")
    except SaveFileWriteError as exc:
        print("full disk:", Path(exc.save_file).name, "not written, errno", exc.errno)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space freed
    print("bytes in the save_file:", save_file.stat().st_size)
    print("kept in memory:", [m["role"] for m in session.messages])
    reply = await session.run()
    print("after freeing space:", reply.choices[0].message.content, "tools run:", len(ran))
    print("saved now:", [m["role"] for m in await TranscriptFile(save_file).load()])


async def open_round(folder: Path) -> None:
    save_file = folder / "crashed.jsonl"
    call = {"id": "c1", "type": "function", "function": {"name": "read_log", "arguments": "{}"}}
    lines = [
        {"role": "user", "content": "Read the log."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    save_file.write_text("".join(json.dumps(m) + "\n" for m in lines))  # the crash cut here
    ran: list[str] = []

    def read_log_counted() -> str:
        """Read the server log."""
        ran.append("read_log")
        return LOG

    fake = FakeCompletion(text("Starting over."))
    session = Session(MODEL, save_file=save_file, tools=[read_log_counted], completion=fake)
    await session.ask("Go on.")
    print("sent after the crash:", [m["role"] for m in fake.prompts[0]], "tools run again:", ran)
    revisions = await TranscriptFile(save_file).revisions()
    print("set aside, still in the file:", [m["role"] for m in revisions.earlier[-1]])


async def main() -> None:
    folder = Path(tempfile.mkdtemp())
    await full_disk(folder)
    await open_round(folder)


if __name__ == "__main__":
    anyio.run(main)
