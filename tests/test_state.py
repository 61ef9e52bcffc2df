"""The state contract (ctxmw.state), for the in-memory backend and a real Redis server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from ctxmw.errors import NotesFull, SettingsError
from ctxmw.state import MemoryState, Note, NoteBounds, RedisState, State, key, open_state
from tests._redis import RedisServer

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "redis"])
async def state(request: pytest.FixtureRequest) -> AsyncIterator[State]:
    if request.param == "memory":
        yield MemoryState()
        return
    pytest.importorskip("redis")
    server: RedisServer = request.getfixturevalue("redis_server")
    backend = RedisState(server.url)
    await backend.client.flushdb()
    yield backend
    await backend.aclose()


async def test_values_round_trip_and_delete(state: State) -> None:
    assert await state.get("k") is None
    await state.set("k", "v1")
    await state.set("k", "v2")
    assert await state.get("k") == "v2"
    await state.delete("k")
    assert await state.get("k") is None


async def test_notes_come_back_in_push_order_once(state: State) -> None:
    for text in ("one", "two", "three"):
        await state.push_note("c", "note", text)
    taken = await state.claim_notes("c", "call-1")
    assert [n.text for n in taken] == ["one", "two", "three"]
    await state.settle("c", "call-1")
    assert await state.claim_notes("c", "call-2") == []
    assert await state.pending_notes("c") == []


async def test_an_unsettled_claim_is_taken_over_by_the_next_request(state: State) -> None:
    await state.push_note("c", "note", "kept")
    assert [n.text for n in await state.claim_notes("c", "died")] == ["kept"]
    # The process that claimed it never settles (killed): the note is still owed.
    assert [n.text for n in await state.pending_notes("c")] == ["kept"]
    await state.push_note("c", "note", "later")
    taken = await state.claim_notes("c", "retry")
    assert [n.text for n in taken] == ["kept", "later"]
    await state.settle("c", "retry")
    assert await state.claim_notes("c", "next") == []


async def test_settle_requeues_what_was_not_delivered(state: State) -> None:
    await state.push_note("c", "note", "a")
    await state.push_note("c", "abort", "stop")
    await state.push_note("c", "note", "b")
    taken = await state.claim_notes("c", "x")
    await state.settle("c", "x", [n for n in taken if n.kind == "note"])
    again = await state.claim_notes("c", "y")
    assert [(n.kind, n.text) for n in again] == [("note", "a"), ("note", "b")]


async def test_conversations_are_separate(state: State) -> None:
    await state.push_note("c1", "note", "for c1")
    assert await state.claim_notes("c2", "x") == []
    assert [n.text for n in await state.claim_notes("c1", "y")] == ["for c1"]


async def test_concurrent_claims_hold_each_note_exactly_once(state: State) -> None:
    for i in range(20):
        await state.push_note("c", "note", f"n{i}")
    results: list[list[Note]] = [[] for _ in range(8)]

    async def claim(i: int) -> None:
        results[i] = await state.claim_notes("c", f"claim-{i}")

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(claim, i)
    # A later claim takes over an unsettled earlier one (the contract), so several claims may
    # have returned a note; but the store holds each note once, under one claim, still owed.
    seen = sorted({n.seq for r in results for n in r})
    assert len(seen) == 20
    pending = await state.pending_notes("c")
    assert sorted(n.seq for n in pending) == seen


async def test_concurrent_claims_that_settle_leave_nothing_owed(state: State) -> None:
    for i in range(30):
        await state.push_note("c", "note", f"n{i}")
    delivered: list[Note] = []

    async def claim_and_settle(i: int) -> None:
        notes = await state.claim_notes("c", f"claim-{i}")
        delivered.extend(notes)
        await state.settle("c", f"claim-{i}")

    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(claim_and_settle, i)
    assert await state.pending_notes("c") == []
    assert {n.text for n in delivered} == {f"n{i}" for i in range(30)}


async def test_memory_values_expire() -> None:
    now = [0.0]
    state = MemoryState(clock=lambda: now[0])
    await state.set("k", "v", ttl_s=10)
    now[0] = 9.9
    assert await state.get("k") == "v"
    now[0] = 10.0
    assert await state.get("k") is None


async def test_memory_values_are_bounded() -> None:
    state = MemoryState(max_values=2)
    for name in ("a", "b", "c"):
        await state.set(name, name)
    assert [await state.get(n) for n in ("a", "b", "c")] == [None, "b", "c"]


def test_keys_share_one_hash_tag_per_conversation() -> None:
    assert key("conv-1", "notes") == "ctxmw:{conv-1}:notes"


def test_open_state_names_what_is_allowed() -> None:
    assert isinstance(open_state(None), MemoryState)
    assert isinstance(open_state("memory"), MemoryState)
    with pytest.raises(SettingsError, match=r"'postgres://x'.*'memory'.*redis://"):
        open_state("postgres://x")


async def push_many(state: State, conversation: str, count: int) -> None:
    """``count`` notes ``n0``, ``n1``, ...: into a real Redis as its push script stores them
    (the list of pending notes, the sequence counter; see ctxmw.state.redis), in one pipeline."""
    if not isinstance(state, RedisState):
        for i in range(count):
            await state.push_note(conversation, "note", f"n{i}")
        return
    async with state.client.pipeline(transaction=False) as pipe:
        for start in range(0, count, 1000):
            notes = [Note(i + 1, "note", f"n{i}").to_json() for i in range(start, start + 1000)]
            pipe.rpush(key(conversation, "notes"), *notes[: count - start])
        pipe.set(key(conversation, "seq"), count)
        await pipe.execute()


async def test_a_claim_of_twenty_thousand_notes_takes_them_all(state: State) -> None:
    await push_many(state, "c", 20_000)
    taken = await state.claim_notes("c", "big")
    assert sorted(n.text for n in taken) == sorted(f"n{i}" for i in range(20_000))
    assert len(await state.pending_notes("c")) == 20_000  # claimed, owed until settled
    await state.settle("c", "big")
    assert await state.pending_notes("c") == []


async def test_a_claim_takes_its_limit_and_leaves_the_rest_at_any_size(state: State) -> None:
    await push_many(state, "c", 20_000)
    await state.push_note("c", "abort", "stop")
    taken = await state.claim_notes("c", "first", limit=100)
    oldest = sorted((await state.pending_notes("c")), key=lambda n: n.seq)[:100]
    assert [n.seq for n in taken[:100]] == [n.seq for n in oldest]
    assert [n.kind for n in taken[100:]] == ["abort"]  # an abort is never left waiting
    await state.settle("c", "first")
    left = await state.pending_notes("c")
    assert len(left) == 19_900
    assert all(n.kind == "note" for n in left)
    rest = await state.claim_notes("c", "second", limit=100)
    assert [n.seq for n in rest] == [n.seq for n in left[:100]]


async def test_a_claim_within_its_limit_keeps_push_order(state: State) -> None:
    for text in ("a", "b", "c", "d"):
        await state.push_note("conv", "note", text)
    first = await state.claim_notes("conv", "x", limit=3)
    await state.settle("conv", "x", first[1:2])  # "b" was not delivered
    second = await state.claim_notes("conv", "y", limit=3)
    assert [n.text for n in first] == ["a", "b", "c"]
    assert [n.text for n in second] == ["b", "d"]


BOUNDS = NoteBounds(
    conversation_notes=3, conversation_note_bytes=20, scope="team:a", scope_note_bytes=30
)


async def test_a_note_past_a_conversation_bound_is_refused_naming_it(state: State) -> None:
    for text in ("one", "two", "three"):
        await state.push_note("team:a/c", "note", text, BOUNDS)
    with pytest.raises(NotesFull) as raised:
        await state.push_note("team:a/c", "note", "four", BOUNDS)
    assert (raised.value.limit, raised.value.allowed, raised.value.held) == (
        "conversation_notes",
        3,
        3,
    )
    assert "conversation_notes limit is 3" in str(raised.value)
    taken = await state.claim_notes("team:a/c", "x")
    await state.settle("team:a/c", "x")
    with pytest.raises(NotesFull) as raised:
        await state.push_note("team:a/c", "note", "x" * 21, BOUNDS)
    assert raised.value.limit == "conversation_note_bytes"
    assert [n.text for n in taken] == ["one", "two", "three"]
    assert await state.pending_notes("team:a/c") == []


async def test_a_scope_bound_counts_every_conversation_until_delivered(state: State) -> None:
    for i in range(3):
        await state.push_note(f"team:a/c{i}", "note", "x" * 10, BOUNDS)
    with pytest.raises(NotesFull) as raised:
        await state.push_note("team:a/c3", "note", "y", BOUNDS)
    assert (raised.value.limit, raised.value.held) == ("scope_note_bytes", 30)
    await state.push_note("team:b/c3", "note", "y", NoteBounds(3, 20, "team:b", 30))  # another
    await state.claim_notes("team:a/c0", "x")
    await state.settle("team:a/c0", "x")  # delivered: its bytes leave the scope's count
    await state.push_note("team:a/c3", "note", "y" * 10, BOUNDS)
    assert await state.pending_notes("team:a/c3") != []
