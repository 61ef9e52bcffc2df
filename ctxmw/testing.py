"""A scripted stand-in for ``litellm.acompletion``, for ctxmw's tests and for yours.

Queue the responses the "model" gives, pass the fake as ``completion=``, and assert on what it
received::

    from ctxmw import Session
    from ctxmw.testing import FakeCompletion, text, tool_calls

    fake = FakeCompletion(tool_calls(("add", {"a": 1, "b": 2})), text("3"))
    session = Session("openai/gpt-4o-mini", tools=[add], completion=fake, prompt_strategies="none")
    reply = await session.ask("1 + 2?")
    assert fake.calls[1]["messages"][-1]["content"] == "3"

A model that reads a compacted result back is scripted with :func:`readback` (a ``ctxmw_expand``
tool call) and :func:`handles` (the handles a prompt shows)::

    fake = FakeCompletion(
        lambda call: tool_calls(readback(handles(call["messages"])[0], 1, 20)),
        text("done"),
    )

Responses are real ``litellm.ModelResponse`` objects, so code that reads them works unchanged.
A response queued without usage gets an estimate at call time (prompt tokens = characters of the
request / 4, no cache reads); ``usage(...)`` sets exact figures, cache reads included. Queue an
exception to make that call raise it. With ``stream=True`` the fake answers with an async stream
of chunks that ``litellm.stream_chunk_builder`` reassembles.
"""

from __future__ import annotations

import copy
import inspect
import itertools
import json
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, TypeAlias

from ctxmw import _litellm
from ctxmw.context.readback import READBACK_TOOL_NAME
from ctxmw.context.tokens import CHARS_PER_TOKEN

__all__ = [
    "FakeCompletion",
    "Scripted",
    "handles",
    "readback",
    "text",
    "tool_call",
    "tool_calls",
    "usage",
]

Scripted: TypeAlias = "Any | BaseException | Callable[[dict[str, Any]], Any]"
"""A queued item: a response, an exception to raise, or a function of the call's kwargs."""

_ids = itertools.count(1)


class FakeCompletion:
    """An async callable with the signature of ``litellm.acompletion`` that replays a script.

    Args:
        *responses: queued in order; see :meth:`queue`.

    Attributes:
        calls: the keyword arguments of every call, deep-copied when received (``model``,
            ``messages`` as sent, ``tools``, ...).
    """

    def __init__(self, *responses: Scripted) -> None:
        self.calls: list[dict[str, Any]] = []
        self._queue: deque[Scripted] = deque()
        self.queue(*responses)

    def queue(self, *responses: Scripted) -> FakeCompletion:
        """Append responses: ``ModelResponse`` objects (see :func:`text`, :func:`tool_calls`),
        exceptions to raise, or callables that get the call's kwargs and return a response
        (sync or async). Returns ``self`` for chaining."""
        self._queue.extend(responses)
        return self

    @property
    def remaining(self) -> int:
        """How many queued responses have not been used yet."""
        return len(self._queue)

    @property
    def prompts(self) -> list[list[dict[str, Any]]]:
        """The ``messages`` of every call, in order."""
        return [call.get("messages", []) for call in self.calls]

    async def __call__(self, model: str, messages: list[Any] | None = None, **kwargs: Any) -> Any:
        """Record the call and return (or raise) the next queued item."""
        call = copy.deepcopy({"model": model, "messages": messages or [], **kwargs})
        self.calls.append(call)
        if not self._queue:
            raise RuntimeError(
                f"FakeCompletion got call #{len(self.calls)} but its queue is empty; queue one "
                "response per expected model call."
            )
        item = self._queue.popleft()
        if isinstance(item, BaseException):
            raise item
        response = await _resolve(item, call)
        _ensure_usage(response, call)
        return _stream(response) if kwargs.get("stream") else response


usage = _litellm.usage_object
"""``usage(prompt_tokens, completion_tokens, *, cached_tokens=0, cache_write_tokens=None)``: a
``litellm.Usage`` with ``prompt_tokens_details.cached_tokens`` (and cache writes)."""


def text(content: str, *, usage: Any = None, model: str = "fake-model") -> Any:
    """A final answer: an assistant message with ``content`` and no tool calls."""
    return _litellm.model_response(content, None, usage, model)


def tool_call(
    name: str, arguments: Mapping[str, Any] | str | None = None, *, id: str | None = None
) -> dict[str, Any]:
    """One tool call in the OpenAI shape; ``arguments`` as a dict or raw JSON text."""
    raw = arguments if isinstance(arguments, str) else json.dumps(dict(arguments or {}))
    call_id = id if id is not None else f"call_{next(_ids)}"
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


def tool_calls(
    *calls: dict[str, Any] | tuple[str, Mapping[str, Any] | str],
    content: str | None = None,
    usage: Any = None,
    model: str = "fake-model",
) -> Any:
    """An assistant message calling tools: each item a :func:`tool_call` or ``(name, args)``."""
    built = [c if isinstance(c, dict) else tool_call(c[0], c[1]) for c in calls]
    return _litellm.model_response(content, built, usage, model)


def readback(
    handle: str,
    start: int | None = None,
    end: int | None = None,
    *,
    pattern: str | None = None,
    offset: int | None = None,
    limit: int | None = None,
    id: str | None = None,
) -> dict[str, Any]:
    """A ``ctxmw_expand`` tool call reading ``handle`` back: lines ``start`` to ``end``, or the
    lines holding ``pattern``, or characters from ``offset`` (``limit`` of them). Give it to
    :func:`tool_calls`, alone (ctxmw answers it and calls the model again) or beside the
    caller's own calls."""
    given = {"start": start, "end": end, "pattern": pattern, "offset": offset, "limit": limit}
    args = {"handle": handle, **{k: v for k, v in given.items() if v is not None}}
    return tool_call(READBACK_TOOL_NAME, args, id=id)


_SHOWN = re.compile(r"(?:ctxmw_expand handle |\[ctxmw offload )([0-9a-f]{16})")


def handles(messages: list[dict[str, Any]]) -> list[str]:
    """The read-back handles a prompt shows (compacted results and offload previews), in order,
    each once."""
    found: dict[str, None] = {}
    for message in messages:
        content = message.get("content")
        if message.get("role") == "tool" and isinstance(content, str):
            found.update(dict.fromkeys(_SHOWN.findall(content)))
    return list(found)


async def _resolve(item: Any, call: dict[str, Any]) -> Any:
    if callable(item) and not hasattr(item, "choices"):
        result = item(call)
        return await result if inspect.isawaitable(result) else result
    return item


def _ensure_usage(response: Any, call: dict[str, Any]) -> None:
    if getattr(response, "usage", None) is not None or not hasattr(response, "choices"):
        return
    sent = json.dumps(call.get("messages", []), default=str) + json.dumps(call.get("tools") or [])
    reply = json.dumps(response.choices[0].message.model_dump(exclude_none=True), default=str)
    response.usage = usage(
        max(1, len(sent) // CHARS_PER_TOKEN), max(1, len(reply) // CHARS_PER_TOKEN)
    )


async def _stream(response: Any) -> AsyncIterator[Any]:
    for chunk in _litellm.stream_chunks(response):
        yield chunk
