"""What a fleet keeps in the Redis every tenant shares: digests, sizes and roles, no content."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from ctxmw.state import RedisState
from tests._fleet_convo import history
from tests._redis import RedisServer
from tests.test_proxy_callback import make_hook, scoped, send

pytestmark = pytest.mark.anyio

SECRET = "AKIA-not-a-real-key-4f9c2d"


@pytest.fixture
async def redis_state(redis_server: RedisServer) -> AsyncIterator[RedisState]:
    pytest.importorskip("redis")
    state = RedisState(redis_server.url)
    await state.client.flushdb()
    yield state
    await state.aclose()


async def every_value(state: RedisState) -> dict[str, Any]:
    """Every key of the server and its value, whatever its type."""
    client, found = state.client, {}
    async for name in client.scan_iter():
        kind = await client.type(name)
        if kind == "string":
            found[name] = await client.get(name)
        elif kind == "list":
            found[name] = await client.lrange(name, 0, -1)
        elif kind == "set":
            found[name] = sorted(await client.smembers(name))
        else:
            found[name] = await client.dump(name)
    return found


def with_secret(rounds: int) -> list[dict[str, Any]]:
    messages = history(rounds)
    messages[3] = {**messages[3], "content": f"DB_PASSWORD={SECRET}\n{messages[3]['content']}"}
    return messages


async def test_redis_holds_no_message_content_after_a_conversation(
    redis_state: RedisState,
) -> None:
    a, b = make_hook(redis_state, ledger="redis"), make_hook(redis_state, ledger="redis")
    await redis_state.push_note(scoped(), "note", "Notes are content the operator stored.")
    for i in range(1, 8):  # alternating replicas, past an epoch boundary
        await send((a, b)[i % 2], with_secret(i), reply=f"I read {SECRET} in the file.")
    stored = await every_value(redis_state)
    assert any(name.endswith(":telemetry") for name in stored)
    leaks = {name: value for name, value in stored.items() if SECRET in repr(value)}
    assert leaks == {}
    assert not any("module_1.py" in repr(value) for value in stored.values())
