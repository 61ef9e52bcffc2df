"""What each kind of call has on disk when it returns, and that its file I/O stays off the loop.

A warm call shares few worker-thread trips between the lock, the transcript, the inbox and the
ledger (``benchmarks/bench_trips.py`` counts them per kind of call); these tests hold the
promises that sharing must keep: every round on disk and the lock free when the call returns,
the ledger line written with its round, delivered notes settled, no file I/O on the loop.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxmw
from ctxmw.runtime import wrapper
from ctxmw.runtime.conversations import Conversations
from ctxmw.testing import FakeCompletion, text, tool_calls
from ctxmw.types import Messages
from tests._lock import lock_is_free
from tests.test_inbox_nonblocking import armed, install_detector

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"
QUIET = {"telemetry": False}


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wrapper, "_conversations", Conversations())


def lines(path: Path) -> list[dict[str, Any]]:
    """The file's lines as JSON; [] while it does not exist."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_every_warm_session_turn_is_on_disk_and_the_lock_free(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(*(text(f"answer {n}") for n in range(4)))
    session = ctxmw.Session(MODEL, save_file=save_file, completion=fake, settings=QUIET)
    await session.ask("first")  # cold: creates the file
    for n in range(1, 4):
        await session.ask(f"turn {n}")
    assert lines(save_file) == session.messages
    assert lock_is_free(tmp_path / "agent.jsonl")


async def test_warm_stateless_calls_append_their_rounds(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    history: Messages = [{"role": "user", "content": "first"}]
    fake = FakeCompletion(*(text(f"answer {n}") for n in range(4)))
    for n in range(4):
        response = await ctxmw.acompletion(
            MODEL, history, save_file=save_file, completion=fake, settings=QUIET
        )
        history = [
            *history,
            response.choices[0].message.model_dump(),
            {"role": "user", "content": f"q{n}"},
        ]
    assert [m["content"] for m in lines(save_file)][-2:] == ["q2", "answer 3"]


async def test_the_inbox_strategy_leaves_a_prompt_alone_without_an_inbox(tmp_path: Path) -> None:
    out = await ctxmw.prepare_prompt(
        [{"role": "user", "content": "hi"}], "inbox", save_file=tmp_path / "agent.jsonl"
    )
    assert out == [{"role": "user", "content": "hi"}]


async def test_a_note_waiting_in_the_inbox_is_still_delivered_and_settled(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(text("one"), text("two"))
    session = ctxmw.Session(MODEL, save_file=save_file, completion=fake, settings=QUIET)
    await session.ask("first")
    await ctxmw.inbox.deliver(save_file, "operator note")
    await session.ask("second")
    assert fake.prompts[1][-1] == {"role": "user", "content": "operator note"}
    pending = await ctxmw.inbox.list_inbox(save_file)
    assert [e.delivered for e in pending] == [True]


Step = str  # "ask" (a Session), "stateless" (ctxmw.acompletion), "outside" (another writer)


async def run_mix(save_file: Path, steps: list[Step]) -> None:
    fake = FakeCompletion(*(text(f"answer {n}") for n in range(len(steps))))
    session = ctxmw.Session(MODEL, save_file=save_file, completion=fake, settings=QUIET)
    expected: Messages = []  # every step's messages, in the order they happened
    answers = 0
    for n, step in enumerate(steps):
        said = {"role": "user", "content": f"{step} {n}"}
        expected.append(said)
        if step == "outside":
            with save_file.open("a") as handle:
                handle.write(json.dumps(said) + "\n")
            continue
        if step == "ask":
            await session.ask(said["content"])
        else:
            history = [*lines(save_file), said]
            await ctxmw.acompletion(
                MODEL, history, save_file=save_file, completion=fake, settings=QUIET
            )
        expected.append({"role": "assistant", "content": f"answer {answers}"})
        answers += 1
        assert lines(save_file) == expected, (step, n)
        assert lock_is_free(save_file)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from(["ask", "stateless", "outside"]), min_size=1, max_size=6))
def test_a_mix_of_callers_and_another_writer_keeps_the_file_whole(
    tmp_path_factory: pytest.TempPathFactory, steps: list[Step]
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(wrapper, "_conversations", Conversations())
        save_file = tmp_path_factory.mktemp("mix") / "agent.jsonl"
        anyio.run(run_mix, save_file, steps)


async def test_a_caller_that_rebuilds_its_dicts_hands_the_strategies_last_calls_objects(
    tmp_path: Path,
) -> None:
    # Agent frameworks convert their own message objects to fresh dicts on every call. The
    # equal prefix is then handed on as the previous call's dicts, so the strategies' memos
    # (keyed by identity) resume instead of starting over; the content is the caller's.
    seen: list[Messages] = []

    def spy(messages: Messages, ctx: Any) -> Messages:
        seen.append(messages)
        return messages

    history: Messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "one"}]
    fake = FakeCompletion(text("a1"), text("a2"))
    for n in range(2):
        fresh = json.loads(json.dumps(history))  # equal dicts, new objects
        await ctxmw.acompletion(
            MODEL,
            fresh,
            save_file=tmp_path / "agent.jsonl",
            completion=fake,
            prompt_strategies=[spy],
            settings=QUIET,
        )
        assert seen[-1] == fresh
        history = [*history, {"role": "assistant", "content": f"a{n + 1}"}]
        history.append({"role": "user", "content": f"more {n}"})
    first, second = seen
    assert all(a is b for a, b in zip(first, second[: len(first)], strict=True))


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_a_tool_round_is_on_disk_with_its_result(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(text("hello"), tool_calls(("add", {"a": 1, "b": 2})), text("3"))
    session = ctxmw.Session(
        MODEL, save_file=save_file, tools=[add], completion=fake, settings=QUIET
    )
    await session.ask("hi")
    await session.ask("1 + 2?")
    assert [m["role"] for m in lines(save_file)][-4:] == ["user", "assistant", "tool", "assistant"]


async def test_a_read_stream_saves_its_answer_and_gives_the_lock_back(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    history: Messages = [{"role": "user", "content": "one"}]
    fake = FakeCompletion(text("a1"), text("a2"))
    for n in range(2):
        stream = await ctxmw.acompletion(
            MODEL, history, save_file=save_file, stream=True, completion=fake, settings=QUIET
        )
        _ = [chunk async for chunk in stream]
        assert lines(save_file)[-1] == {"role": "assistant", "content": f"a{n + 1}"}
        assert lock_is_free(save_file)
        history = [*history, {"role": "assistant", "content": f"a{n + 1}"}]
        history.append({"role": "user", "content": "two"})
    assert lines(save_file)[-1] == {"role": "assistant", "content": "a2"}
    assert lock_is_free(tmp_path / "agent.jsonl")


def ledger_rounds(save_file: Path) -> list[int]:
    return [entry["round"] for entry in lines(save_file.with_name("agent.jsonl.ledger.jsonl"))]


async def test_a_warm_turn_has_its_ledger_line_on_disk_when_it_returns(tmp_path: Path) -> None:
    # Telemetry on: the ledger line is written with the round's commit, after the transcript's
    # fsync, and is on disk when the call returns.
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(*(text(f"answer {n}") for n in range(4)))
    session = ctxmw.Session(MODEL, save_file=save_file, completion=fake)
    await session.ask("first")
    for n in range(1, 4):
        await session.ask(f"turn {n}")
        assert ledger_rounds(save_file) == [0] * (n + 1)  # on disk when the call returns


async def test_each_stateless_call_with_telemetry_has_its_ledger_line_on_return(
    tmp_path: Path,
) -> None:
    save_file = tmp_path / "agent.jsonl"
    history: Messages = [{"role": "user", "content": "first"}]
    fake = FakeCompletion(*(text(f"answer {n}") for n in range(3)))
    for n in range(3):
        await ctxmw.acompletion(MODEL, history, save_file=save_file, completion=fake)
        assert ledger_rounds(save_file) == [0] * (n + 1)
        history = [*history, {"role": "assistant", "content": f"answer {n}"}]
        history.append({"role": "user", "content": f"q{n}"})


async def test_a_tool_round_with_telemetry_writes_each_line_with_its_round(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(text("hello"), tool_calls(("add", {"a": 1, "b": 2})), text("3"))
    session = ctxmw.Session(MODEL, save_file=save_file, tools=[add], completion=fake)
    await session.ask("hi")
    await session.ask("1 + 2?")
    assert ledger_rounds(save_file) == [0, 0, 1]


async def test_a_warm_call_with_telemetry_does_no_file_io_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lock, the transcript, the inbox and the ledger share few worker-thread trips: none of
    # that work may move onto the event loop's thread to save one.
    detector = install_detector(monkeypatch)
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(*(text(f"answer {n}") for n in range(4)))
    session = ctxmw.Session(MODEL, save_file=save_file, completion=fake)
    history: Messages = [{"role": "user", "content": "first"}]
    await session.ask("first")
    await ctxmw.acompletion(MODEL, history, save_file=tmp_path / "b.jsonl", completion=fake)
    history = [
        *history,
        {"role": "assistant", "content": "answer 1"},
        {"role": "user", "content": "q"},
    ]
    await armed(detector, lambda: session.ask("second"))
    await armed(
        detector,
        lambda: ctxmw.acompletion(MODEL, history, save_file=tmp_path / "b.jsonl", completion=fake),
    )
    assert detector.violations == []
    assert ledger_rounds(save_file) == [0, 0]


async def test_a_stream_closed_unread_saves_nothing_and_the_next_call_reads_the_file(
    tmp_path: Path,
) -> None:
    save_file = tmp_path / "agent.jsonl"
    history: Messages = [{"role": "user", "content": "one"}]
    fake = FakeCompletion(text("a1"), text("a2"), text("a3"))
    stream = await ctxmw.acompletion(
        MODEL, history, save_file=save_file, stream=True, completion=fake, settings=QUIET
    )
    _ = [chunk async for chunk in stream]
    stream = await ctxmw.acompletion(
        MODEL, history, save_file=save_file, stream=True, completion=fake, settings=QUIET
    )
    await stream.aclose()  # the call ends unsaved: its conversation keeps no transcript
    assert lock_is_free(tmp_path / "agent.jsonl")
    history = [*history, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "2"}]
    await ctxmw.acompletion(MODEL, history, save_file=save_file, completion=fake, settings=QUIET)
    assert [m["content"] for m in lines(save_file)] == ["one", "a1", "2", "a3"]
