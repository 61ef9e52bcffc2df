"""The state contract (ctxmw.state), for the in-memory backend and a real Redis server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from ctxmw.errors import SettingsError
from ctxmw.state import MemoryState, Note, RedisState, State, key, open_state
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
