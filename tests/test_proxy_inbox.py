"""The inbox of a proxy conversation: at most ``inbox_max_messages`` notes a request, every
abort whatever the count, the rest waiting in order."""

from __future__ import annotations

import pytest

from ctxmw.state import MemoryState
from tests._fleet_convo import FLEET_SETTINGS, history
from tests.test_proxy_callback import make_hook, scoped, send

pytestmark = pytest.mark.anyio


async def test_a_request_shows_at_most_inbox_max_messages_notes() -> None:
    state = MemoryState()
    hook = make_hook(state, settings={**FLEET_SETTINGS, "inbox_max_messages": 2})
    for i in range(5):
        await state.push_note(scoped(), "note", f"note {i}")
    shown = []
    for round_ in range(1, 5):
        prompt, _ = await send(hook, history(round_))
        shown.append([m["content"] for m in prompt[len(history(round_)) :]])
    assert shown == [["note 0", "note 1"], ["note 2", "note 3"], ["note 4"], []]


async def test_an_abort_behind_the_limit_still_stops_the_request() -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException

    state = MemoryState()
    hook = make_hook(state, settings={**FLEET_SETTINGS, "inbox_max_messages": 1})
    for i in range(3):
        await state.push_note(scoped(), "note", f"note {i}")
    await state.push_note(scoped(), "abort", "Budget reached.")
    with pytest.raises(HTTPException) as raised:
        await send(hook, history(1))
    assert raised.value.status_code == 400
    assert [n.text for n in await state.pending_notes(scoped())] == [f"note {i}" for i in range(3)]
