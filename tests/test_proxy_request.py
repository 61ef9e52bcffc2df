"""What a tenant sends that cannot be a conversation is a 400 naming it, never a 500."""

from __future__ import annotations

from typing import Any

import pytest

from ctxmw.proxy._request import MAX_DEPTH, nested_too_deep
from ctxmw.state import MemoryState
from tests._fleet_convo import history
from tests.test_proxy_callback import make_hook, send

pytestmark = pytest.mark.anyio


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": "x"}
    for _ in range(depth):
        value = {"inner": value}
    return value


@pytest.mark.parametrize("entry", ["just text", 42, None, ["role", "user"]])
async def test_a_message_that_is_not_an_object_is_a_400_naming_its_index(entry: Any) -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException

    messages = [*history(2), entry]
    with pytest.raises(HTTPException) as raised:
        await send(make_hook(MemoryState()), messages)
    assert raised.value.status_code == 400
    assert "messages[6] is" in str(raised.value.detail)


async def test_a_head_nested_thousands_deep_is_a_400_not_a_recursion_error() -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException

    deep = {"role": "user", "content": "hi", "extra": _nested(5_000)}
    with pytest.raises(HTTPException) as raised:
        await send(make_hook(MemoryState()), [history(0)[0], deep], session=None)
    assert raised.value.status_code == 400
    assert f"messages[1] nests more than {MAX_DEPTH} levels" in str(raised.value.detail)


async def test_a_deep_message_later_never_turns_the_answer_into_an_error() -> None:
    deep = {"role": "user", "content": "hi", "extra": _nested(5_000)}
    hook = make_hook(MemoryState(), settings={"prompt_strategies": "inbox"})
    prompt, _ = await send(hook, [*history(2), {"role": "assistant", "content": "ok"}, deep])
    assert prompt[-1] is deep


def test_the_depth_walk_itself_never_recurses() -> None:
    assert nested_too_deep([{"a": 1}, _nested(200_000)]).startswith("messages[1] nests")
