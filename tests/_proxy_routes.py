"""Driving the proxy hook through its other routes, as LiteLLM 1.110's proxy calls it.

For ``/v1/messages`` (call type ``anthropic_messages``) and ``/v1/responses`` (``aresponses``)
the proxy hands the pre-call hook the request as the client sent it, the deployment hook the
same fields beside the deployment's, and the post-call hooks the route's own answer; every
hook of one request gets the same logging object (``litellm_logging_obj``). The shapes here
are the ones a real proxy passed (seen through a spy callback).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxmw.proxy import CtxmwProxyHook, config_from_mapping
from ctxmw.state import MemoryState

ANTHROPIC = ("anthropic_messages", "anthropic/claude-sonnet-4-5-20250929")
RESPONSES = ("aresponses", "openai/gpt-4o")
CHAT = ("acompletion", "openai/gpt-4o")
_ids = itertools.count()


class Key:
    """The bits of the proxy's key object the hook reads."""

    key_alias, metadata, token, team_id, user_id = None, None, "hashed-token", None, None


def make_hook(**settings: Any) -> CtxmwProxyHook:
    return CtxmwProxyHook(
        config_from_mapping({"ctxmw": {"settings": settings}}), state=MemoryState()
    )


@dataclass
class Sent:
    """What one request sent upstream, and its ledger entry."""

    kwargs: dict[str, Any]
    record: dict[str, Any] = field(default_factory=dict)


async def send(
    hook: CtxmwProxyHook,
    route: tuple[str, str],
    body: dict[str, Any],
    answer: Any,
    *,
    session: str = "conv",
    stream: bool = False,
) -> Sent:
    """One request through the hooks; ``answer`` is what the deployment returned (a list: the
    chunks of a stream)."""
    call_type, model = route
    call_id, request = f"call-{next(_ids)}", object()  # request: the proxy's logging object
    data = {"model": "agent", **body, "litellm_call_id": call_id, "litellm_session_id": session}
    data["litellm_logging_obj"] = request
    await hook.async_pre_call_hook(Key(), None, data, call_type)
    kwargs = {
        "model": model,
        "api_base": "http://127.0.0.1:9/v1",
        **body,
        "litellm_call_id": call_id,
        "litellm_logging_obj": request,
    }
    sent = await hook.async_pre_call_deployment_hook(kwargs, call_type) or kwargs
    if stream:
        async for _ in hook.async_post_call_streaming_iterator_hook(Key(), _aiter(answer), data):
            pass
    else:
        await hook.async_post_call_success_hook(data, Key(), answer)
    metadata = data.get("metadata") or {}
    record = (metadata.get("spend_logs_metadata") or {}).get("ctxmw") or {}
    return Sent(sent, record)


async def first_call(
    hook: CtxmwProxyHook, route: tuple[str, str], body: dict[str, Any], request: object = None
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """One request through the pre-call hook and its deployment call, as the proxy makes them
    (``request``: its logging object, a new one by default): the request's data, the
    deployment's kwargs and what the hook returned for them."""
    call_type, model = route
    request = object() if request is None else request
    data = {"model": "agent", **body, "litellm_call_id": "c", "litellm_logging_obj": request}
    await hook.async_pre_call_hook(Key(), None, data, call_type)
    kwargs = {"model": model, **body, "litellm_call_id": "c", "litellm_logging_obj": request}
    sent = await hook.async_pre_call_deployment_hook(kwargs, call_type)
    assert sent is not None
    return data, kwargs, sent


async def _aiter(chunks: Sequence[Any]) -> Any:
    for chunk in chunks:
        yield chunk


def anthropic_answer(i: int, *, read: int = 0) -> dict[str, Any]:
    return {
        "id": f"msg_{i}",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "usage": {
            "input_tokens": 100,
            "output_tokens": 5,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": 7,
        },
    }


def anthropic_events(i: int, *, read: int = 0) -> list[bytes]:
    """A streamed answer, as the proxy's iterator hook sees it: server-sent events as bytes."""
    message = {**anthropic_answer(i, read=read), "content": []}
    events = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def responses_answer(i: int, *, read: int = 0) -> dict[str, Any]:
    return {
        "id": f"resp_{i}",
        "object": "response",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}],
            }
        ],
        "usage": {
            "input_tokens": 100,
            "output_tokens": 5,
            "total_tokens": 105,
            "input_tokens_details": {"cached_tokens": read},
        },
    }


def responses_events(i: int, *, read: int = 0) -> list[dict[str, Any]]:
    answer = responses_answer(i, read=read)
    return [
        {"type": "response.created", "response": {**answer, "status": "in_progress"}},
        {"type": "response.output_text.delta", "delta": "ok"},
        {"type": "response.completed", "response": answer},
    ]


def rewrites(prompts: Sequence[Sequence[Any]]) -> int:
    """Calls whose prompt does not extend the previous one's: each is a prefix the provider
    caches anew. Cache marks are not content (a provider's cache ignores where they sit)."""
    count = 0
    for before, after in itertools.pairwise(prompts):
        kept = [_unmarked(m) for m in before]
        count += kept != [_unmarked(m) for m in after[: len(kept)]]
    return count


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value
