"""What a replica keeps between requests is bounded in bytes, counted where it is held.

Large requests (answered, refused by the provider, streams the client left) go through one
hook with small limits. Each structure's own count stays within its bound, and what the
process still holds afterwards (traced allocations, after a collection) stays within the sum
of the bounds: the requests themselves are gone.
"""

from __future__ import annotations

import gc
import itertools
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ctxmw.proxy import CtxmwProxyHook
from ctxmw.state import MemoryState
from ctxmw.testing import text, usage
from ctxmw.types import Messages
from tests.test_proxy_callback import API_BASE, MODEL, Key, make_hook

pytestmark = pytest.mark.anyio

KIB = 1024
LIMITS = {
    "memo_bytes": 1024 * KIB,
    "telemetry_bytes": 256 * KIB,
    "memory_state_bytes": 256 * KIB,
    "pending_bytes": 1024 * KIB,
}
_ids = itertools.count()


def large(convo: int, kib: int = 512) -> Messages:
    """A conversation of ten tool rounds, ``kib`` KiB of tool output in all."""
    messages: Messages = [
        {"role": "system", "content": f"You are agent {convo}."},
        {"role": "user", "content": "Read the files."},
    ]
    for i in range(10):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        body = f"line {i} of conversation {convo}\n" * (kib * KIB // 10 // 28)
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": body})
    return messages


async def start(hook: CtxmwProxyHook, convo: int) -> dict[str, Any]:
    """A request through the hooks up to the upstream call: its data."""
    call_id = f"mem-{next(_ids)}"
    request = object()  # the proxy's logging object: one per request, the same in every hook
    data: dict[str, Any] = {
        "model": "agent",
        "messages": large(convo),
        "litellm_call_id": call_id,
        "litellm_logging_obj": request,
        "litellm_session_id": f"conv-{convo}",
        "metadata": {},
    }
    await hook.async_pre_call_hook(Key(), None, data, "acompletion")
    kwargs = {"model": MODEL, "api_base": API_BASE, "messages": data["messages"]}
    kwargs.update(litellm_call_id=call_id, litellm_logging_obj=request)
    await hook.async_pre_call_deployment_hook(kwargs, "acompletion")
    return data


async def chunks() -> AsyncIterator[Any]:
    for word in ("still", "streaming", "when", "the", "client", "left"):
        yield {"choices": [{"delta": {"content": word}}]}


async def left_stream(hook: CtxmwProxyHook, data: dict[str, Any]) -> None:
    """The client reads one chunk of the answer, then disconnects (the proxy closes the
    stream's generator)."""
    stream = hook.async_post_call_streaming_iterator_hook(Key(), chunks(), data)
    await anext(stream)
    await stream.aclose()


async def one(hook: CtxmwProxyHook, convo: int) -> None:
    data = await start(hook, convo)
    if convo % 3 == 0:
        await hook.async_post_call_success_hook(data, Key(), text("ok", usage=usage(10, 1)))
    elif convo % 3 == 1:  # the provider refused it
        await hook.async_post_call_failure_hook(data, RuntimeError("400 from upstream"), Key())
    else:
        await left_stream(hook, data)


def counted(hook: CtxmwProxyHook) -> dict[str, int]:
    state = hook.state
    assert isinstance(state, MemoryState)
    return {
        "memo_bytes": hook._memos.held_bytes,
        "telemetry_bytes": hook._telemetry().held_bytes,
        "memory_state_bytes": state.held_bytes,
        "pending_bytes": hook._pending.held_bytes,
    }


async def test_a_replica_holds_at_most_its_limits_after_many_large_requests() -> None:
    hook = make_hook(MemoryState(), limits=LIMITS)
    hook.state  # noqa: B018 - built before the measure, with its bound
    await one(hook, 0)  # warm: a tokenizer, the metrics, the settings
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for convo in range(1, 25):  # 12 MiB of requests
            await one(hook, convo)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert all(counted(hook)[name] <= bound for name, bound in LIMITS.items()), counted(hook)
    # The conversation served last always stays in the memo, whatever its size (0.5 MiB).
    assert held <= sum(LIMITS.values()) + 1024 * KIB, f"{held / KIB / KIB:.1f} MiB held"


async def test_a_stream_the_client_left_is_forgotten_at_once() -> None:
    hook = make_hook(MemoryState())
    data = await start(hook, 1)
    assert len(hook._pending) == 1
    await left_stream(hook, data)
    assert len(hook._pending) == 0
    assert hook._pending.held_bytes == 0
