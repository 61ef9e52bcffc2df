"""The inbox routes on a FastAPI app (in process): notes are bounded, each refusal names its
limit, and nothing refused is stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from ctxmw.state import MemoryState
from tests.test_proxy_callback import Key, make_hook, scoped

pytestmark = pytest.mark.anyio

LIMITS = {
    "note_bytes": 100,
    "abort_reason_bytes": 50,
    "conversation_notes": 3,
    "conversation_note_bytes": 200,
    "scope_note_bytes": 400,
}


class Posting:
    """A client of one app with the routes, authenticated as ``key``."""

    def __init__(self, client: Any, state: MemoryState) -> None:
        self.client, self.state = client, state

    async def note(self, conversation: str, text: object) -> Any:
        return await self.client.post(f"/ctxmw/inbox/{conversation}", json={"text": text})

    async def abort(self, conversation: str, reason: object) -> Any:
        return await self.client.post(f"/ctxmw/abort/{conversation}", json={"reason": reason})


@pytest.fixture
async def posting() -> AsyncIterator[Posting]:
    fastapi = pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from litellm.proxy.auth.user_api_key_auth import user_api_key_auth

    from ctxmw.proxy.route import install_routes

    state = MemoryState()
    app = fastapi.FastAPI()
    install_routes(app, make_hook(state, limits=LIMITS))
    app.dependency_overrides[user_api_key_auth] = lambda: Key(team="a")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
        yield Posting(client, state)


def named(response: Any, status: int, limit: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["detail"]["limit"] == limit
    assert limit in response.json()["detail"]["error"]


async def test_a_note_or_an_abort_reason_over_its_length_is_a_413(posting: Posting) -> None:
    named(await posting.note("run", "x" * 101), 413, "note_bytes")
    named(await posting.abort("run", "x" * 51), 413, "abort_reason_bytes")
    assert await posting.state.pending_notes(scoped("run", Key(team="a"))) == []
    assert (await posting.note("run", "x" * 100)).status_code == 200
    assert (await posting.abort("run", "x" * 50)).status_code == 200


async def test_a_conversation_holds_its_notes_and_bytes_at_most(posting: Posting) -> None:
    for _ in range(3):
        assert (await posting.note("run", "a note")).status_code == 200
    named(await posting.note("run", "one more"), 429, "conversation_notes")
    named(await posting.abort("run", "stop"), 429, "conversation_notes")
    assert (await posting.note("other", "x" * 100)).status_code == 200
    named(await posting.note("other", "x" * 100 + "y"), 413, "note_bytes")
    assert (await posting.note("other", "x" * 100)).status_code == 200
    named(await posting.note("other", "z"), 429, "conversation_note_bytes")


async def test_a_scope_holds_its_bytes_at_most_across_conversations(posting: Posting) -> None:
    for i in range(4):
        assert (await posting.note(f"run-{i}", "x" * 100)).status_code == 200
    named(await posting.note("run-5", "x"), 429, "scope_note_bytes")


async def test_a_text_that_is_not_unicode_is_a_400(posting: Posting) -> None:
    response = await posting.client.post(
        "/ctxmw/inbox/run",
        content=b'{"text": "half a pair \\ud800"}',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    assert "'text' must be a non-empty string of text" in response.json()["detail"]["error"]
