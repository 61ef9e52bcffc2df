"""A save_file cut at any point resumes without an unanswered call, and loses no complete line.

The policy (``ctxmw.runtime._open_round``): a tool round left open at the end is set aside (kept
in the file as an earlier revision, not sent, its tools not run again), unless the turn's input
answers it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

import ctxmw
from ctxmw.runtime.transcript import TranscriptFile, dump_line
from ctxmw.testing import FakeCompletion, text, tool_calls
from ctxmw.types import Messages

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
# Every cut of a bash agent's session; the cuts inside parallel rounds of a Claude Code one.
REAL = [
    ("msa_deepseek_bench_dev_pvlib__pvlib-python-1072.jsonl", False),
    ("cc_258c7280.jsonl", True),
]


def real_transcript(name: str) -> Messages:
    path = SHARED / name
    if not path.exists():
        pytest.skip(
            f"{name} is the project's CI data ({path.parent}, beside the clone, not part of "
            "it): this real-transcript case runs where that folder is, as in .ci/run"
        )
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def cut_points(messages: Messages, data: bytes, parallel_only: bool) -> list[int]:
    """Every line boundary and the middle of every line (``parallel_only``: of the lines of
    rounds with several calls, where a cut can leave some results and not others)."""
    ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    wanted = _parallel_lines(messages) if parallel_only else set(range(len(ends)))
    points = [0] if not parallel_only else []
    for n, end in enumerate(ends):
        start = ends[n - 1] if n else 0
        if n in wanted:
            points += [start + (end - start) // 2, end]
    return points


def _parallel_lines(messages: Messages) -> set[int]:
    lines: set[int] = set()
    for i, message in enumerate(messages):
        ids = {c["id"] for c in message.get("tool_calls") or ()}
        if len(ids) > 1:
            lines.add(i)
            lines.update(
                j for j in range(i + 1, len(messages)) if messages[j].get("tool_call_id") in ids
            )
    return lines


def closed(messages: Messages) -> Messages:
    """``messages`` without a last assistant message some of whose calls have no result."""
    for i in range(len(messages) - 1, -1, -1):
        calls = messages[i].get("tool_calls")
        if messages[i]["role"] == "assistant" and calls:
            answered = {m.get("tool_call_id") for m in messages[i + 1 :]}
            return messages if {c["id"] for c in calls} <= answered else messages[:i]
        if messages[i]["role"] != "tool":
            return messages
    return messages


async def resume(path: Path, ran: list[str]) -> FakeCompletion:
    def bash(command: str) -> str:
        """Run a shell command."""
        ran.append(command)
        return "ran"

    fake = FakeCompletion(text("resumed"))
    session = ctxmw.Session(
        MODEL,
        save_file=path,
        tools=[bash],
        completion=fake,
        prompt_strategies="none",
        settings={"telemetry": False},
    )
    await session.ask("Go on.")
    return fake


@pytest.mark.parametrize(("name", "parallel_only"), REAL)
async def test_every_cut_point_of_a_real_transcript_resumes_validly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, parallel_only: bool
) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)  # durability is not what this measures
    full = real_transcript(name)
    data = b"".join(dump_line(m) for m in full)
    points = cut_points(full, data, parallel_only)
    failures: list[str] = []
    for n, point in enumerate(points):
        path = tmp_path / f"cut{n}.jsonl"
        path.write_bytes(data[:point])
        complete = data[: data.rfind(b"\n", 0, point) + 1]
        expected = closed(full[: complete.count(b"\n")])
        ran: list[str] = []
        fake = await resume(path, ran)
        broken = await _broken(fake.prompts[0], expected, ran, path, complete)
        if broken:
            failures.append(f"byte {point}: {broken}")
    assert failures == [], f"{len(failures)} of {len(points)} cut points"


async def _broken(
    prompt: Messages, expected: Messages, ran: list[str], path: Path, complete: bytes
) -> str | None:
    """What is wrong after resuming a cut file, or None."""
    try:
        ctxmw.validate(prompt)
    except ctxmw.InvalidTranscriptError as exc:
        return f"the prompt is invalid: {exc}"
    if prompt != [*expected, {"role": "user", "content": "Go on."}]:
        return "the prompt is not the complete rounds and the new question"
    if ran:
        return "a tool of a set-aside round ran again"
    if not (await anyio.Path(path).read_bytes()).startswith(complete):
        return "a complete line was cut from the file"
    if await TranscriptFile(path).load() != [*prompt, {"role": "assistant", "content": "resumed"}]:
        return "the file does not load back to what was sent and answered"
    return None


def call_round(call_id: str = "c1") -> Messages:
    call = {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    return [
        {"role": "user", "content": "Look it up."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]


async def test_results_passed_to_run_answer_an_open_round_instead(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    path.write_bytes(b"".join(dump_line(m) for m in call_round()))
    fake = FakeCompletion(text("found"))
    session = ctxmw.Session(MODEL, save_file=path, completion=fake, prompt_strategies="none")
    await session.run([{"role": "tool", "tool_call_id": "c1", "content": "42"}])
    assert [m["role"] for m in fake.prompts[0]] == ["user", "assistant", "tool"]
    assert b'"ctxmw"' not in path.read_bytes()  # nothing set aside


async def test_a_set_aside_round_stays_readable_as_an_earlier_revision(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    round_ = call_round()
    path.write_bytes(b"".join(dump_line(m) for m in round_))
    fake = FakeCompletion(text("again"))
    await ctxmw.Session(MODEL, save_file=path, completion=fake).ask("And?")
    revisions = await TranscriptFile(path).revisions()
    assert revisions.earlier == [round_]
    assert [m["content"] for m in revisions.current] == ["Look it up.", "And?", "again"]


async def test_a_round_a_torn_write_left_with_some_results_is_kept_in_the_file(
    tmp_path: Path,
) -> None:
    two = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for i in (1, 2)
        ],
    }
    lines: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        two,
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
    ]
    data = b"".join(dump_line(m) for m in lines)
    path = tmp_path / "agent.jsonl"
    path.write_bytes(data + b'{"role": "tool", "tool_call_id": "c2", "con')  # torn
    fake = FakeCompletion(tool_calls(("f", {})), text("done"))
    ran: list[int] = []

    def f() -> str:
        """A tool with a side effect."""
        ran.append(1)
        return "side effect"

    await ctxmw.Session(MODEL, save_file=path, tools=[f], completion=fake).ask("again")
    assert path.read_bytes().startswith(data)  # the complete lines stay, the torn one goes
    assert ran == [1]  # once, for the new call; the set-aside round's calls never ran again
    revisions = await TranscriptFile(path).revisions()
    assert revisions.earlier[0] == lines
    ctxmw.validate(revisions.current)


async def test_asking_the_same_after_a_crash_mid_turn_continues_that_turn(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    question = {"role": "user", "content": "Look it up."}
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    second = {**call, "id": "c2"}
    lines = [
        question,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "page 1"},
        {"role": "assistant", "content": None, "tool_calls": [second]},  # the crash cut here
    ]
    path.write_bytes(b"".join(dump_line(m) for m in lines))
    fake = FakeCompletion(text("found"))
    await ctxmw.Session(MODEL, save_file=path, completion=fake).ask("Look it up.")
    assert fake.prompts[0] == lines[:3]  # the question once: the turn goes on from page 1
