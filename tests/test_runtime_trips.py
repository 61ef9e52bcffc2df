"""Worker-thread trips per call: each one costs the event loop's thread CPU and latency.

A warm call (the save_file already loaded, no inbox note waiting) makes one trip before the
model call (the lock, "did the file change?", the inbox listing) and one after it (the round's
write and fsync, the telemetry's ledger line, the inbox notes settled, the lock given back). Most
tests here turn telemetry off; the ``..._with_telemetry`` ones show that it adds no trip.

Counted by wrapping both doors to a worker thread: ``anyio.to_thread.run_sync`` and the event
loop's ``run_in_executor`` (what aiofiles uses).
"""

from __future__ import annotations

import asyncio
import asyncio.base_events
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
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


class Trips:
    """Counts worker-thread trips while installed; ``take()`` returns the count and resets it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real_run_sync = anyio.to_thread.run_sync
        real_executor = asyncio.base_events.BaseEventLoop.run_in_executor

        async def run_sync(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return await real_run_sync(func, *args, **kwargs)

        def run_in_executor(loop: Any, executor: Any, func: Any, *args: Any) -> Any:
            self.count += 1
            return real_executor(loop, executor, func, *args)

        monkeypatch.setattr(anyio.to_thread, "run_sync", run_sync)
        monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "run_in_executor", run_in_executor)

    def take(self) -> int:
        out, self.count = self.count, 0
        return out


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> Trips:
    monkeypatch.setattr(wrapper, "_conversations", Conversations())
    return Trips(monkeypatch)


def lines(path: Path) -> list[dict[str, Any]]:
    """The file's lines as JSON; [] while it does not exist."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_warm_session_turn_makes_two_trips(tmp_path: Path, trips: Trips) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(*(text(f"answer {n}") for n in range(4)))
    session = ctxmw.Session(MODEL, save_file=save_file, completion=fake, settings=QUIET)
    await session.ask("first")  # cold: creates the file
    trips.take()
    for n in range(1, 4):
        await session.ask(f"turn {n}")
        assert trips.take() == 2
    # The promise those trips keep: every turn is on disk, the lock is free.
    assert lines(save_file) == session.messages
    assert lock_is_free(tmp_path / "agent.jsonl")


async def test_a_warm_stateless_call_makes_two_trips(tmp_path: Path, trips: Trips) -> None:
    save_file = tmp_path / "agent.jsonl"
    history: Messages = [{"role": "user", "content": "first"}]
    fake = FakeCompletion(*(text(f"answer {n}") for n in range(4)))
    for n in range(4):
        response = await ctxmw.acompletion(
            MODEL, history, save_file=save_file, completion=fake, settings=QUIET
        )
        assert trips.take() == (3 if n == 0 else 2)  # the first call reads the file
        history = [
            *history,
            response.choices[0].message.model_dump(),
            {"role": "user", "content": f"q{n}"},
        ]
    assert [m["content"] for m in lines(save_file)][-2:] == ["q2", "answer 3"]


async def test_the_inbox_strategy_lists_an_absent_inbox_in_one_trip(
    tmp_path: Path, trips: Trips
) -> None:
    out = await ctxmw.prepare_prompt(
        [{"role": "user", "content": "hi"}], "inbox", save_file=tmp_path / "agent.jsonl"
    )
    assert out == [{"role": "user", "content": "hi"}]
    assert trips.take() == 1


async def test_a_note_waiting_in_the_inbox_is_still_delivered_and_settled(
    tmp_path: Path, trips: Trips
) -> None:
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


async def run_mix(save_file: Path, steps: list[Step], trips: Trips) -> None:
    fake = FakeCompletion(*(text(f"answer {n}") for n in range(len(steps))))
    session = ctxmw.Session(MODEL, save_file=save_file, completion=fake, settings=QUIET)
    last: dict[Step, int] = {}  # each caller's last step; another writer since then: a reload
    answers = 0
    for n, step in enumerate(steps):
        if step == "outside":
            with save_file.open("a") as handle:
                handle.write(json.dumps({"role": "user", "content": f"outside {n}"}) + "\n")
            last[step] = n
            continue
        warm = step in last and all(k <= last[step] for k in last.values())
        trips.take()
        if step == "ask":
            await session.ask(f"ask {n}")
        else:
            history = lines(save_file)
            history.append({"role": "user", "content": f"stateless {n}"})
            await ctxmw.acompletion(
                MODEL, history, save_file=save_file, completion=fake, settings=QUIET
            )
        assert trips.take() == (2 if warm else 3), (step, n)
        assert lines(save_file)[-1] == {"role": "assistant", "content": f"answer {answers}"}
        assert lock_is_free(save_file)
        answers += 1
        last[step] = n


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from(["ask", "stateless", "outside"]), min_size=1, max_size=6))
def test_trips_per_call_over_a_mix_of_callers(
    tmp_path_factory: pytest.TempPathFactory, steps: list[Step]
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(wrapper, "_conversations", Conversations())
        trips = Trips(monkeypatch)
        save_file = tmp_path_factory.mktemp("mix") / "agent.jsonl"
        anyio.run(run_mix, save_file, steps, trips)


async def test_a_caller_that_rebuilds_its_dicts_hands_the_strategies_last_calls_objects(
    tmp_path: Path, trips: Trips
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


async def test_a_tool_round_costs_one_trip_that_also_lists_the_inbox(
    tmp_path: Path, trips: Trips
) -> None:
    # Before the turn: one trip. The tool round's commit writes it and lists the inbox for the
    # next round (the default strategies include the inbox), the final commit gives the lock back.
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(text("hello"), tool_calls(("add", {"a": 1, "b": 2})), text("3"))
    session = ctxmw.Session(
        MODEL, save_file=save_file, tools=[add], completion=fake, settings=QUIET
    )
    await session.ask("hi")
    trips.take()
    await session.ask("1 + 2?")
    assert trips.take() == 3
    assert [m["role"] for m in lines(save_file)][-4:] == ["user", "assistant", "tool", "assistant"]


async def test_a_warm_stream_makes_two_trips_and_gives_the_lock_back(
    tmp_path: Path, trips: Trips
) -> None:
    save_file = tmp_path / "agent.jsonl"
    history: Messages = [{"role": "user", "content": "one"}]
    fake = FakeCompletion(text("a1"), text("a2"))
    for n in range(2):
        stream = await ctxmw.acompletion(
            MODEL, history, save_file=save_file, stream=True, completion=fake, settings=QUIET
        )
        _ = [chunk async for chunk in stream]
        # The first call reads the file. The call ends with its stream: the conversation then
        # keeps the transcript the commit wrote (it was 3 trips a call, each one reading the
        # file again, when the conversation was handed over before the stream was read).
        assert trips.take() == (3 if n == 0 else 2)
        history = [*history, {"role": "assistant", "content": f"a{n + 1}"}]
        history.append({"role": "user", "content": "two"})
    assert lines(save_file)[-1] == {"role": "assistant", "content": "a2"}
    assert lock_is_free(tmp_path / "agent.jsonl")


def ledger_rounds(save_file: Path) -> list[int]:
    return [entry["round"] for entry in lines(save_file.with_name("agent.ledger.jsonl"))]


async def test_a_warm_turn_writes_its_ledger_line_in_the_commits_trip(
    tmp_path: Path, trips: Trips
) -> None:
    # Telemetry on: the ledger line is built on the loop and written by the commit's trip, after
    # the transcript's fsync; not a third trip of its own.
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(*(text(f"answer {n}") for n in range(4)))
    session = ctxmw.Session(MODEL, save_file=save_file, completion=fake)
    await session.ask("first")
    trips.take()
    for n in range(1, 4):
        await session.ask(f"turn {n}")
        assert trips.take() == 2
        assert ledger_rounds(save_file) == [0] * (n + 1)  # on disk when the call returns


async def test_a_warm_stateless_call_with_telemetry_makes_two_trips(
    tmp_path: Path, trips: Trips
) -> None:
    save_file = tmp_path / "agent.jsonl"
    history: Messages = [{"role": "user", "content": "first"}]
    fake = FakeCompletion(*(text(f"answer {n}") for n in range(3)))
    for n in range(3):
        await ctxmw.acompletion(MODEL, history, save_file=save_file, completion=fake)
        assert trips.take() == (3 if n == 0 else 2)
        assert ledger_rounds(save_file) == [0] * (n + 1)
        history = [*history, {"role": "assistant", "content": f"answer {n}"}]
        history.append({"role": "user", "content": f"q{n}"})


async def test_a_tool_round_with_telemetry_writes_each_line_with_its_round(
    tmp_path: Path, trips: Trips
) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = FakeCompletion(text("hello"), tool_calls(("add", {"a": 1, "b": 2})), text("3"))
    session = ctxmw.Session(MODEL, save_file=save_file, tools=[add], completion=fake)
    await session.ask("hi")
    trips.take()
    await session.ask("1 + 2?")
    assert trips.take() == 3
    assert ledger_rounds(save_file) == [0, 0, 1]


async def test_a_warm_call_with_telemetry_does_its_file_io_only_in_its_trips(
    tmp_path: Path, trips: Trips, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The trips above are few because the lock, the transcript, the inbox and the ledger share
    # them: none of that work may move onto the event loop's thread to save a trip.
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
    trips.take()
    await armed(detector, lambda: session.ask("second"))
    await armed(
        detector,
        lambda: ctxmw.acompletion(MODEL, history, save_file=tmp_path / "b.jsonl", completion=fake),
    )
    assert detector.violations == []
    assert trips.take() == 2 + 2
    assert ledger_rounds(save_file) == [0, 0]


async def test_a_stream_closed_unread_saves_nothing_and_the_next_call_reads_the_file(
    tmp_path: Path, trips: Trips
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
    trips.take()
    history = [*history, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "2"}]
    await ctxmw.acompletion(MODEL, history, save_file=save_file, completion=fake, settings=QUIET)
    assert trips.take() == 3
    assert [m["content"] for m in lines(save_file)] == ["one", "a1", "2", "a3"]
