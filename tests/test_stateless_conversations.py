"""The stateless path keeps each conversation's state between calls: memo, recorder, transcript.

``ctxmw.acompletion`` builds a Session per call; what the next call of the same conversation can
reuse (the strategies' memo, the loaded save_file, the telemetry recorder) is kept in a bounded
registry, never shared by two calls running at once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

import ctxmw
from ctxmw.errors import UsageError
from ctxmw.runtime import revisions, wrapper
from ctxmw.runtime.conversations import Conversation, Conversations
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.strategies.shorten_tools_economic import NAME
from ctxmw.testing import FakeCompletion, text
from ctxmw.types import Messages, StrategyContext
from tests.transcripts import adjacent_calls

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Conversations:
    registry = Conversations()
    monkeypatch.setattr(wrapper, "_conversations", registry)
    return registry


def memo_spy(seen: list[dict[str, Any]]) -> Any:
    def spy(messages: Messages, ctx: StrategyContext) -> Messages:
        assert ctx.memo is not None
        ctx.memo["calls"] = ctx.memo.get("calls", 0) + 1
        seen.append(ctx.memo)
        return messages

    return spy


async def test_consecutive_calls_of_one_save_file_share_the_strategies_memo(
    tmp_path: Path,
) -> None:
    seen: list[dict[str, Any]] = []
    spy = memo_spy(seen)
    history: Messages = [{"role": "user", "content": "one"}]
    for n in range(3):
        await ctxmw.acompletion(
            "gpt-4o",
            history,
            save_file=tmp_path / "a.jsonl",
            prompt_strategies=[spy],
            completion=FakeCompletion(text(f"answer {n}")),
        )
        history = [*history, {"role": "assistant", "content": f"answer {n}"}]
        history.append({"role": "user", "content": f"more {n}"})
    assert seen[0] is seen[1] is seen[2]
    assert seen[2]["calls"] == 3


async def test_an_explicit_session_id_without_a_save_file_keeps_its_memo_too() -> None:
    seen: list[dict[str, Any]] = []
    spy = memo_spy(seen)
    for session in ("a", "b", "a"):
        await ctxmw.acompletion(
            "gpt-4o",
            [{"role": "user", "content": "hi"}],
            session=session,
            prompt_strategies=[spy],
            completion=FakeCompletion(text("ok")),
        )
    assert seen[0] is seen[2]
    assert seen[1] is not seen[0]
    assert seen[2]["calls"] == 2
    # A call that names no conversation has a memo of its own.
    await ctxmw.acompletion(
        "gpt-4o",
        [{"role": "user", "content": "hi"}],
        prompt_strategies=[spy],
        completion=FakeCompletion(text("ok")),
    )
    assert seen[3]["calls"] == 1


async def test_other_settings_start_a_new_memo() -> None:
    seen: list[dict[str, Any]] = []
    spy = memo_spy(seen)
    for size in (20, 20, 30):
        await ctxmw.acompletion(
            "gpt-4o",
            [{"role": "user", "content": "hi"}],
            session="s",
            prompt_strategies=[spy],
            strategy_options={"epoch_size": size},
            completion=FakeCompletion(text("ok")),
        )
    assert seen[0] is seen[1]
    assert seen[2] is not seen[0]
    assert seen[2]["calls"] == 1


async def test_the_transcript_is_read_again_only_when_the_file_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[Path] = []
    original = TranscriptFile.load

    async def counting(self: TranscriptFile) -> Messages:
        loads.append(self.path)
        return await original(self)

    monkeypatch.setattr(TranscriptFile, "load", counting)
    save_file = tmp_path / "a.jsonl"
    history: Messages = [{"role": "user", "content": "one"}]

    async def call(n: int) -> None:
        nonlocal history
        await ctxmw.acompletion(
            "gpt-4o",
            history,
            save_file=save_file,
            prompt_strategies="none",
            completion=FakeCompletion(text(f"answer {n}")),
        )
        history = [*history, {"role": "assistant", "content": f"answer {n}"}]
        history.append({"role": "user", "content": f"more {n}"})

    for n in range(3):
        await call(n)
    assert len(loads) == 1
    # Another writer (here a Session, as another process would) changes the file.
    other = ctxmw.Session("gpt-4o", save_file=save_file, completion=FakeCompletion(text("x")))
    await other.run([{"role": "user", "content": "from elsewhere"}])
    history = [*history[:-1]]  # the caller does not know that turn: its history is the truth
    history.append({"role": "user", "content": "after"})
    before = len(loads)
    await call(9)
    assert len(loads) == before + 1
    reopened = ctxmw.Session("gpt-4o", save_file=save_file)
    assert await reopened.load() == [*history[:-1]]


async def test_the_caller_messages_already_matched_are_not_compared_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = 0
    original = revisions.same_message

    def counting(a: Any, b: Any) -> bool:
        nonlocal calls
        calls += 1
        return original(a, b)

    monkeypatch.setattr(revisions, "same_message", counting)
    tool_call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}

    def history(spelling: Any, turns: int) -> Messages:
        # The provider said content "" beside the tool call; the framework re-sends None.
        out: Messages = [{"role": "user", "content": "go"}]
        out.append({"role": "assistant", "content": spelling, "tool_calls": [dict(tool_call)]})
        out.append({"role": "tool", "tool_call_id": "c1", "content": "result"})
        for n in range(turns):
            out += [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": "a"}]
        return [*out, {"role": "user", "content": f"q{turns}"}]

    async def call(spelling: Any, turns: int) -> None:
        await ctxmw.acompletion(
            "gpt-4o",
            history(spelling, turns),
            save_file=tmp_path / "a.jsonl",
            prompt_strategies="none",
            completion=FakeCompletion(text("a")),
        )

    await call("", 40)
    await call(None, 41)
    calls = 0
    await call(None, 42)  # new dicts, the same spelling as the last call's: all known
    assert calls == 1  # only the last call's answer, which the caller had not sent before
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    assert not any('"edit"' in line for line in lines)  # the re-spelling is not an edit


async def test_two_concurrent_calls_of_one_conversation_do_not_share_a_memo() -> None:
    seen: list[dict[str, Any]] = []
    both_inside = anyio.Event()
    inside = 0

    async def slow(messages: Messages, ctx: StrategyContext) -> Messages:
        nonlocal inside
        assert ctx.memo is not None
        seen.append(ctx.memo)
        inside += 1
        if inside == 2:
            both_inside.set()
        with anyio.fail_after(10):
            await both_inside.wait()
        ctx.memo["mine"] = ctx.memo.get("mine", 0) + 1
        return messages

    async def one() -> None:
        await ctxmw.acompletion(
            "gpt-4o",
            [{"role": "user", "content": "hi"}],
            session="shared",
            prompt_strategies=[slow],
            completion=FakeCompletion(text("ok")),
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
    assert seen[0] is not seen[1]
    assert seen[0]["mine"] == seen[1]["mine"] == 1
    await one()  # the registered memo (the first call's) is the one that goes on
    assert seen[2] is seen[0]
    assert seen[2]["mine"] == 2


async def test_a_failed_call_leaves_no_transcript_for_the_next_one(tmp_path: Path) -> None:
    save_file = tmp_path / "a.jsonl"
    history: Messages = [{"role": "user", "content": "one"}]
    await ctxmw.acompletion(
        "gpt-4o", history, save_file=save_file, completion=FakeCompletion(text("a"))
    )
    history = [*history, {"role": "assistant", "content": "a"}, {"role": "user", "content": "2"}]
    with pytest.raises(RuntimeError, match="provider down"):
        await ctxmw.acompletion(
            "gpt-4o",
            history,
            save_file=save_file,
            completion=FakeCompletion(RuntimeError("provider down")),
        )
    entry = wrapper._conversations.values()[0]
    assert not entry.record.loaded  # the next call reads the file again
    assert entry.memo is not None
    await ctxmw.acompletion(
        "gpt-4o", history, save_file=save_file, completion=FakeCompletion(text("b"))
    )
    lines = [json.loads(line) for line in save_file.read_text().splitlines()]
    assert [m["content"] for m in lines] == ["one", "a", "2", "b"]


def test_the_registry_forgets_the_least_recently_used_first() -> None:
    registry = Conversations(max_conversations=2)
    for key in ("a", "b", "a", "c"):
        registry.check_in(key, registry.check_out(key))
    assert "b" not in registry
    assert "a" in registry
    assert "c" in registry


def test_the_registry_is_bounded_by_the_bytes_its_conversations_hold() -> None:
    from ctxmw.messages._memo import BoundedCache

    registry = Conversations(max_bytes=1000)
    for key in ("a", "b", "c"):
        entry = registry.check_out(key)
        cache = entry.memo["slot"] = BoundedCache()
        cache.put("k", "x" * 400)
        registry.check_in(key, entry)
    assert [k for k in ("a", "b", "c") if k in registry] == ["b", "c"]
    big = registry.check_out("d")
    big.memo["slot"] = cache = BoundedCache()
    cache.put("k", "x" * 5000)
    registry.check_in("d", big)
    assert len(registry) == 1
    assert "d" in registry


def test_a_conversation_checked_out_twice_gives_the_second_a_fresh_entry() -> None:
    registry = Conversations()
    first = registry.check_out("a")
    second = registry.check_out("a")
    assert second is not first
    assert isinstance(second, Conversation)
    registry.check_in("a", second)  # not registered: changes nothing
    registry.check_in("a", first)
    assert registry.check_out("a") is first


SONNET = "anthropic/claude-sonnet-4-5"


async def economic_call(gap: float, model: str = SONNET) -> tuple[Messages, Messages, bool]:
    """The second of two stateless calls ``gap`` seconds apart: its prompt, its history, and
    whether the strategy found the cache cold."""
    source = adjacent_calls(60)
    fake = FakeCompletion(text("ok"), text("ok"))
    now = iter([0.0, gap])
    cold: list[bool] = []

    def spy(messages: Messages, ctx: StrategyContext) -> Messages:
        cold.append(bool(ctx.stats.get(NAME, {}).get("cold")))
        return messages

    for history, name in ((source[:-4], SONNET), (source[:-2], model)):
        await ctxmw.acompletion(
            name,
            history,
            session=f"economic-{gap}-{model}",
            prompt_strategies=[NAME, spy],
            completion=fake,
            clock=lambda: next(now),
            settings={"telemetry": False},
        )
    return fake.prompts[1], source[:-2], cold[-1]


async def test_a_stateless_caller_idle_past_the_ttl_gets_the_cold_cache_compaction() -> None:
    warm, full, was_cold = await economic_call(10.0)
    assert warm == full
    assert not was_cold
    cold, full, was_cold = await economic_call(1000.0)  # idle 1,000 s > the 300 s TTL
    assert was_cold
    assert len(json.dumps(cold)) < len(json.dumps(full))


async def test_a_stateless_caller_switching_models_finds_the_cache_cold() -> None:
    _, _, was_cold = await economic_call(1.0, model="gpt-4o")
    assert was_cold
    _, _, was_cold = await economic_call(1.0)
    assert not was_cold


async def test_a_moving_system_prompt_normalises_only_what_is_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    normalised = 0
    original = revisions.normal_key

    def counting(message: Any) -> str:
        nonlocal normalised
        normalised += 1
        return original(message)

    monkeypatch.setattr(revisions, "normal_key", counting)
    body: Messages = [{"role": "user", "content": "go"}]
    for n in range(60):
        body += [{"role": "assistant", "content": f"a{n}"}, {"role": "user", "content": f"q{n}"}]

    async def call(minute: int) -> None:
        # A framework rebuilds every dict on every call; the system prompt carries the time.
        system = {"role": "system", "content": f"Current time: 10:{minute:02d}."}
        history = [system, *(dict(m) for m in body)]
        await ctxmw.acompletion(
            "gpt-4o",
            history,
            save_file=tmp_path / "a.jsonl",
            prompt_strategies="none",
            completion=FakeCompletion(text(f"answer {minute}")),
        )
        body.extend([{"role": "assistant", "content": f"answer {minute}"}])
        body.append({"role": "user", "content": f"next {minute}"})

    for minute in range(3):
        await call(minute)
    normalised = 0
    await call(3)
    assert normalised <= 8  # the moved system prompt and the newest messages, not all 125
    revisions_seen = await TranscriptFile(tmp_path / "a.jsonl").revisions()
    assert len(revisions_seen.earlier) == 3
    assert revisions_seen.current[0]["content"] == "Current time: 10:03."


async def test_a_sessions_own_system_message_does_not_shift_what_the_caller_matched() -> None:
    fake = FakeCompletion(text("a"), text("b"))
    session = ctxmw.Session("gpt-4o", system="Be brief.", completion=fake, prompt_strategies="none")
    first: Messages = [{"role": "user", "content": "hi"}]
    await session.complete(first)
    second = [*first, {"role": "assistant", "content": "a"}, {"role": "user", "content": "more"}]
    await session.complete(second)
    # The caller's history never had the system message: it is an edit that removes it.
    assert fake.prompts[1] == second
    assert session.messages == [*second, {"role": "assistant", "content": "b"}]


async def test_an_empty_save_file_is_refused_not_ignored() -> None:
    """``save_file=""`` names no file: a clear error, never a run that records nothing."""
    fake = FakeCompletion(text("a"), text("b"))
    history: Messages = [{"role": "user", "content": "x"}]
    with pytest.raises(UsageError, match="names no file"):
        await ctxmw.acompletion("gpt-4o", history, save_file="", completion=fake)
    with pytest.raises(UsageError, match="names no file"):
        await ctxmw.Session("gpt-4o", save_file="", completion=fake).ask("x")
    assert fake.calls == []
