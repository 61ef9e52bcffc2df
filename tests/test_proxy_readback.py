"""ctxmw answers ``ctxmw_expand`` itself in the proxy: the client never sees a read-back.

The hook is driven as the proxy calls it (``tests/_proxy_routes``); its extra calls go to a
fake router. The real proxy and Redis are in ``tests/proxy/test_readback.py``.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ctxmw._litellm import stream_chunk_builder, stream_chunks
from ctxmw.context.readback import READBACK_TOOL_NAME
from ctxmw.proxy import CtxmwProxyHook, config_from_mapping
from ctxmw.proxy._readback_state import MAX_ARGUMENT_BYTES, entry_of
from ctxmw.proxy.tenancy import scope_of
from ctxmw.runtime._readback import READBACK_ROUNDS
from ctxmw.runtime._splices import Splice
from ctxmw.state import MemoryState, State, key
from ctxmw.testing import FakeCompletion, handles, readback, text, tool_call, tool_calls, usage
from tests._proxy_routes import anthropic_answer, responses_answer
from tests._readback import SMALL, TOOL, history, original
from tests._route_formats import anthropic_request, responses_request

pytestmark = pytest.mark.anyio

CHAT, ANTHROPIC, RESPONSES = "acompletion", "anthropic_messages", "aresponses"
_MODELS = {CHAT: "openai/gpt-4o", ANTHROPIC: "anthropic/claude-sonnet-4-5", RESPONSES: "openai/o4"}
_ids = itertools.count()


class Key:
    """The bits of the proxy's key object the hook reads."""

    def __init__(self, team: str | None = None) -> None:
        self.key_alias, self.metadata, self.token = None, None, "hashed-token"
        self.team_id, self.user_id = team, None


class Router:
    """The proxy's router as read-back's extra calls use it: one scripted queue per route."""

    def __init__(self, *chat: Any, anthropic: Sequence[Any] = (), responses: Sequence[Any] = ()):
        self.acompletion = FakeCompletion(*chat)
        self._queues = {"anthropic": list(anthropic), "responses": list(responses)}
        self.calls: list[dict[str, Any]] = []

    async def aanthropic_messages(self, **kwargs: Any) -> Any:
        return self._next("anthropic", kwargs)

    async def aresponses(self, **kwargs: Any) -> Any:
        return self._next("responses", kwargs)

    def _next(self, route: str, kwargs: dict[str, Any]) -> Any:
        self.calls.append(copy.deepcopy(kwargs))
        item = self._queues[route].pop(0)
        return item(kwargs) if callable(item) else item


@dataclass
class Served:
    """One request: what went upstream, what the client got, the request's data."""

    sent: dict[str, Any]
    reply: Any
    data: dict[str, Any]


def make_hook(tmp_path: Path, router: Router, state: State | None = None, **limits: int) -> Any:
    section = {"settings": SMALL, "ledger": str(tmp_path / "ledger.jsonl"), "limits": limits}
    config = config_from_mapping({"ctxmw": section})
    return CtxmwProxyHook(config, state=state or MemoryState(), router=router)


async def serve(
    hook: CtxmwProxyHook,
    call_type: str,
    body: dict[str, Any],
    answer: Callable[[dict[str, Any]], Any],
    *,
    stream: bool = False,
    key: Key | None = None,
) -> Served:
    """One request through the hooks; ``answer`` makes the deployment's answer from what the
    hook sent (a list: a stream's chunks)."""
    request, call_id = object(), f"call-{next(_ids)}"
    data = {"model": "agent", **body, "litellm_call_id": call_id, "litellm_session_id": "conv"}
    data.update(litellm_logging_obj=request, metadata={"user_api_key_hash": "h"}, stream=stream)
    await hook.async_pre_call_hook(key or Key(), None, data, call_type)
    kwargs = {"model": _MODELS[call_type], **body, "litellm_logging_obj": request, "stream": stream}
    sent = await hook.async_pre_call_deployment_hook(kwargs, call_type) or kwargs
    if stream:
        chunks = hook.async_post_call_streaming_iterator_hook(
            key or Key(), _aiter(answer(sent)), data
        )
        return Served(sent, [c async for c in chunks], data)
    final = await hook.async_post_call_success_hook(data, key or Key(), answer(sent))
    return Served(sent, final, data)


async def _aiter(chunks: Sequence[Any]) -> AsyncIterator[Any]:
    for chunk in chunks:
        yield chunk


def tool_names(sent: dict[str, Any]) -> list[str]:
    return [t.get("name") or t["function"]["name"] for t in sent.get("tools") or []]


def chat_handle(sent: dict[str, Any]) -> str:
    return handles(sent["messages"])[0]


def ledger(tmp_path: Path) -> list[dict[str, Any]]:
    text_ = (tmp_path / "ledger.jsonl").read_text()
    return [json.loads(line) for line in text_.splitlines()]


def chat_body(n: int = 8) -> dict[str, Any]:
    return {"messages": history(n), "tools": [TOOL]}


# ---- chat completions -----------------------------------------------------------------------


async def test_chat_a_reply_that_only_reads_back_is_answered_and_the_model_called_again(
    tmp_path: Path,
) -> None:
    router = Router(text("the answer"))
    hook = make_hook(tmp_path, router)
    body = chat_body()
    shown: list[str] = []

    def answer(sent: dict[str, Any]) -> Any:
        shown.append(chat_handle(sent))
        return tool_calls(readback(shown[0], 2, 4, id="rb1"))

    served = await serve(hook, CHAT, body, answer)
    assert served.reply.choices[0].message.content == "the answer"
    assert READBACK_TOOL_NAME in tool_names(served.sent)
    (call,) = router.acompletion.calls
    assert call["model"] == "agent"  # the request's model group, through the router
    assert call["metadata"]["user_api_key_hash"] == "h"  # billed to the caller's key
    assert "litellm_logging_obj" not in call
    assert not call.get("stream")
    reply, answered = call["messages"][-2:]
    assert reply["tool_calls"][0]["function"]["name"] == READBACK_TOOL_NAME
    lines = original(body["messages"], shown[0]).splitlines()[1:4]
    assert answered["tool_call_id"] == "rb1"
    assert all(line in answered["content"] for line in lines)
    assert call["messages"][:-2] == served.sent["messages"]


async def test_chat_the_extra_call_has_its_own_ledger_line_marked_readback(tmp_path: Path) -> None:
    router = Router(text("the answer"))
    hook = make_hook(tmp_path, router)
    await serve(hook, CHAT, chat_body(), lambda s: tool_calls(readback(chat_handle(s), 1, 2)))
    assert [line["readback"] for line in ledger(tmp_path)] == [False, True]


async def test_chat_read_backs_beside_the_clients_calls_reach_it_without_them_and_come_back(
    tmp_path: Path,
) -> None:
    state = MemoryState()
    router = Router()
    hook = make_hook(tmp_path, router, state)
    body = chat_body()
    own = tool_call("read", {"n": 9}, id="own1")

    def answer(sent: dict[str, Any]) -> Any:
        return tool_calls(own, readback(chat_handle(sent), 1, 3, id="rb1"))

    served = await serve(hook, CHAT, body, answer)
    message = served.reply.choices[0].message
    assert [c.id for c in message.tool_calls] == ["own1"]
    assert router.acompletion.calls == []
    raw = await state.get(key(f"{scope_of(Key())}/conv", "readbacks"))
    assert raw is not None
    assert "rb1" in raw
    assert "line " not in raw
    reply = {"role": "assistant", "content": None, "tool_calls": [own]}
    result = {"role": "tool", "tool_call_id": "own1", "content": "nine"}
    later = {**body, "messages": [*body["messages"], reply, result]}
    nxt = await serve(hook, CHAT, later, lambda s: text("ok"))
    sent = nxt.sent["messages"]
    spliced = next(m for m in sent if m.get("tool_calls") and m["tool_calls"][0]["id"] == "own1")
    assert [c["id"] for c in spliced["tool_calls"]] == ["own1", "rb1"]
    at = sent.index(spliced)
    assert [m.get("tool_call_id") for m in sent[at + 1 : at + 3]] == ["own1", "rb1"]
    assert "line " in sent[at + 2]["content"]  # answered again from the request's messages


async def test_one_tenants_kept_read_backs_never_reach_another_tenants_prompt(
    tmp_path: Path,
) -> None:
    state = MemoryState()
    hook = make_hook(tmp_path, Router(), state)
    body = chat_body()
    own = tool_call("read", {"n": 9}, id="own1")
    await serve(
        hook, CHAT, body, lambda s: tool_calls(own, readback(chat_handle(s), 1, 3, id="rb1"))
    )
    reply = {"role": "assistant", "content": None, "tool_calls": [own]}
    result = {"role": "tool", "tool_call_id": "own1", "content": "nine"}
    later = {**body, "messages": [*body["messages"], reply, result]}
    other = await serve(hook, CHAT, later, lambda s: text("ok"), key=Key(team="other"))
    assert not any(
        c["id"] == "rb1" for m in other.sent["messages"] for c in m.get("tool_calls") or []
    )
    assert await state.get(key(f"{scope_of(Key(team='other'))}/conv", "readbacks")) is None


async def test_an_answer_is_cut_at_the_proxys_readback_bytes_bound(tmp_path: Path) -> None:
    router = Router(text("done"))
    hook = make_hook(tmp_path, router, readback_bytes=300)
    await serve(hook, CHAT, chat_body(), lambda s: tool_calls(readback(chat_handle(s), 1, 40)))
    answered = router.acompletion.calls[0]["messages"][-1]["content"]
    assert len(answered.encode()) <= 300
    assert "readback_bytes" in answered


async def test_chat_a_streamed_read_back_never_reaches_the_client(tmp_path: Path) -> None:
    router = Router(text("streamed answer"))
    hook = make_hook(tmp_path, router)

    def answer(sent: dict[str, Any]) -> Any:
        return stream_chunks(tool_calls(readback(chat_handle(sent), 1, 2), usage=usage(10, 1)))

    served = await serve(hook, CHAT, chat_body(), answer, stream=True)
    built = stream_chunk_builder(served.reply)
    assert built.choices[0].message.content == "streamed answer"
    assert not built.choices[0].message.tool_calls
    assert router.acompletion.calls[0]["stream"] is True
    assert [line["readback"] for line in ledger(tmp_path)] == [False, True]


async def test_a_client_tool_named_ctxmw_expand_is_its_own(tmp_path: Path) -> None:
    router = Router()
    hook = make_hook(tmp_path, router)
    mine = {"type": "function", "function": {"name": READBACK_TOOL_NAME, "parameters": {}}}
    body = {**chat_body(), "tools": [mine]}
    reply = tool_calls(tool_call(READBACK_TOOL_NAME, {"x": 1}, id="mine"))
    served = await serve(hook, CHAT, body, lambda s: reply)
    assert tool_names(served.sent) == [READBACK_TOOL_NAME]
    assert served.reply is None


async def test_an_extra_call_that_fails_answers_502_saying_why(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")  # the 502 is FastAPI's HTTPException (the proxy extra)
    router = Router(RuntimeError("deployment down"))
    hook = make_hook(tmp_path, router)
    with pytest.raises(Exception, match="ctxmw_expand") as caught:
        await serve(hook, CHAT, chat_body(), lambda s: tool_calls(readback(chat_handle(s), 1, 2)))
    assert getattr(caught.value, "status_code", None) == 502


_BODIES: dict[str, Callable[[int], dict[str, Any]]] = {
    CHAT: chat_body,
    ANTHROPIC: anthropic_request,
    RESPONSES: responses_request,
}
_ANSWERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    CHAT: lambda s: text("ok"),
    ANTHROPIC: lambda s: anthropic_answer(0),
    RESPONSES: lambda s: responses_answer(0),
}


@pytest.mark.parametrize("call_type", [CHAT, ANTHROPIC, RESPONSES])
async def test_the_tools_block_is_the_same_from_the_first_request_before_any_handle(
    tmp_path: Path, call_type: str
) -> None:
    hook = make_hook(tmp_path, Router())
    first = await serve(hook, call_type, _BODIES[call_type](1), _ANSWERS[call_type])
    assert "ctxmw_expand handle" not in json.dumps(first.sent, default=str)  # nothing compacted yet
    later = await serve(hook, call_type, _BODIES[call_type](8), _ANSWERS[call_type])
    assert "ctxmw_expand handle" in json.dumps(later.sent, default=str)
    assert json.dumps(first.sent["tools"]) == json.dumps(later.sent["tools"])
    assert tool_names(first.sent)[-1] == READBACK_TOOL_NAME


# ---- /v1/messages ---------------------------------------------------------------------------


def anthropic_handle(sent: dict[str, Any]) -> str:
    texts = [
        str(b.get("content"))
        for m in sent["messages"]
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    return handles([{"role": "tool", "content": t} for t in texts])[0]


def anthropic_reading(sent: dict[str, Any], *own: dict[str, Any]) -> dict[str, Any]:
    use = {
        "type": "tool_use",
        "id": "toolu_rb",
        "name": READBACK_TOOL_NAME,
        "input": {"handle": anthropic_handle(sent), "start": 1, "end": 3},
    }
    thinking = {"type": "thinking", "thinking": "I need lines 1-3.", "signature": "sig"}
    return {**anthropic_answer(0), "content": [thinking, *own, use], "stop_reason": "tool_use"}


async def test_messages_a_reply_that_only_reads_back_is_answered(tmp_path: Path) -> None:
    router = Router(anthropic=[anthropic_answer(1)])
    hook = make_hook(tmp_path, router)
    served = await serve(hook, ANTHROPIC, anthropic_request(8), anthropic_reading)
    assert served.reply == anthropic_answer(1)
    assert READBACK_TOOL_NAME in tool_names(served.sent)
    (call,) = router.calls
    reply, results = call["messages"][-2:]
    assert reply["content"][0]["type"] == "thinking"  # as the provider sent it
    (result,) = results["content"]
    assert result["tool_use_id"] == "toolu_rb"
    assert result["content"].startswith(f"[{anthropic_handle(served.sent)}: lines 1-3 of ")
    assert call["messages"][:-2] == served.sent["messages"]
    assert call["model"] == "agent"
    assert [line["readback"] for line in ledger(tmp_path)] == [False, True]


async def test_messages_read_backs_beside_the_clients_calls_are_taken_out(tmp_path: Path) -> None:
    router = Router()
    hook = make_hook(tmp_path, router)
    own = {"type": "tool_use", "id": "toolu_own", "name": "read_file", "input": {}}
    served = await serve(hook, ANTHROPIC, anthropic_request(8), lambda s: anthropic_reading(s, own))
    assert [b.get("name") for b in served.reply["content"] if b["type"] == "tool_use"] == [
        "read_file"
    ]
    assert served.reply["stop_reason"] == "tool_use"
    assert router.calls == []


def sse(message: dict[str, Any]) -> list[bytes]:
    """A Messages reply as the server-sent events of its stream (one event a chunk)."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**message, "content": []}}
    ]
    for i, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            start, delta = {**block, "input": {}}, {"type": "input_json_delta"}
            delta["partial_json"] = json.dumps(block["input"])
        elif block["type"] == "thinking":
            start = {"type": "thinking", "thinking": ""}
            delta = {"type": "thinking_delta", "thinking": block["thinking"]}
        else:
            start, delta = (
                {"type": "text", "text": ""},
                {"type": "text_delta", "text": block["text"]},
            )
        events += [
            {"type": "content_block_start", "index": i, "content_block": start},
            {"type": "content_block_delta", "index": i, "delta": delta},
            {"type": "content_block_stop", "index": i},
        ]
    stop = {"type": "message_delta", "delta": {"stop_reason": message.get("stop_reason")}}
    events += [{**stop, "usage": {"output_tokens": 5}}, {"type": "message_stop"}]
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def parsed(chunks: Sequence[Any]) -> list[dict[str, Any]]:
    text_ = b"".join(chunks).decode()
    return [json.loads(line[5:]) for line in text_.splitlines() if line.startswith("data:")]


async def test_messages_a_streamed_read_back_never_reaches_the_client(tmp_path: Path) -> None:
    router = Router(anthropic=[lambda kwargs: _aiter(sse(anthropic_answer(1)))])
    hook = make_hook(tmp_path, router)
    served = await serve(
        hook, ANTHROPIC, anthropic_request(8), lambda s: sse(anthropic_reading(s)), stream=True
    )
    events = parsed(served.reply)
    assert READBACK_TOOL_NAME not in json.dumps(events)
    assert [e["type"] for e in events].count("message_start") == 1
    assert [e["type"] for e in events].count("message_stop") == 1
    starts = [(e["index"], e["content_block"]["type"]) for e in events if "content_block" in e]
    assert starts == [(0, "thinking"), (1, "text")]  # the read-back's block left out, renumbered
    (call,) = router.calls
    assert call["stream"] is True
    assert call["messages"][-2]["content"][0]["thinking"] == "I need lines 1-3."
    assert call["messages"][-1]["content"][0]["tool_use_id"] == "toolu_rb"
    assert [line["readback"] for line in ledger(tmp_path)] == [False, True]


# ---- /v1/responses --------------------------------------------------------------------------


def responses_handle(sent: dict[str, Any]) -> str:
    outputs = [i["output"] for i in sent["input"] if i.get("type") == "function_call_output"]
    return handles([{"role": "tool", "content": o} for o in outputs])[0]


def responses_reading(sent: dict[str, Any], *own: dict[str, Any]) -> dict[str, Any]:
    args = json.dumps({"handle": responses_handle(sent), "start": 1, "end": 3})
    call = {"type": "function_call", "call_id": "call_rb", "name": READBACK_TOOL_NAME}
    reasoning = {"type": "reasoning", "id": "rs_x", "summary": [], "encrypted_content": "e"}
    output = [reasoning, *own, {**call, "id": "fc_rb", "arguments": args}]
    return {**responses_answer(0), "output": output}


async def test_responses_a_reply_that_only_reads_back_is_answered(tmp_path: Path) -> None:
    router = Router(responses=[responses_answer(1)])
    hook = make_hook(tmp_path, router)
    served = await serve(hook, RESPONSES, responses_request(8), responses_reading)
    assert served.reply == responses_answer(1)
    (call,) = router.calls
    reasoning, read, answered = call["input"][-3:]
    assert reasoning["type"] == "reasoning"
    assert read["name"] == READBACK_TOOL_NAME
    assert answered["type"] == "function_call_output"
    assert answered["call_id"] == "call_rb"
    assert "round " in answered["output"]
    assert call["input"][:-3] == served.sent["input"]
    assert [line["readback"] for line in ledger(tmp_path)] == [False, True]


def response_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """A Responses reply as the events of its stream."""
    opened = {**response, "status": "in_progress", "output": []}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": opened}]
    for i, item in enumerate(response["output"]):
        events.append({"type": "response.output_item.added", "output_index": i, "item": item})
        if item["type"] == "message":
            delta = {"type": "response.output_text.delta", "output_index": i, "delta": "ok"}
            events.append(delta)
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    return [*events, {"type": "response.completed", "response": response}]


async def test_responses_a_streamed_read_back_never_reaches_the_client(tmp_path: Path) -> None:
    router = Router(responses=[lambda kwargs: _aiter(response_events(responses_answer(1)))])
    hook = make_hook(tmp_path, router)
    served = await serve(
        hook,
        RESPONSES,
        responses_request(8),
        lambda s: response_events(responses_reading(s)),
        stream=True,
    )
    events = served.reply
    assert READBACK_TOOL_NAME not in json.dumps(events)
    assert [e["type"] for e in events].count("response.created") == 1
    added = [(e["output_index"], e["item"]["type"]) for e in events if "item" in e]
    assert added[::2] == [(0, "reasoning"), (1, "message")]
    assert events[-1]["response"] == responses_answer(1)
    (call,) = router.calls
    assert call["input"][-1]["call_id"] == "call_rb"
    assert [line["readback"] for line in ledger(tmp_path)] == [False, True]


async def test_responses_read_backs_beside_the_clients_calls_are_taken_out(
    tmp_path: Path,
) -> None:
    router = Router()
    hook = make_hook(tmp_path, router)
    own = {"type": "function_call", "id": "fc_o", "call_id": "call_o", "name": "shell"}
    served = await serve(
        hook,
        RESPONSES,
        responses_request(8),
        lambda s: responses_reading(s, {**own, "arguments": "{}"}),
    )
    names = [i.get("name") for i in served.reply["output"] if i["type"] == "function_call"]
    assert names == ["shell"]
    assert router.calls == []


async def test_kept_read_backs_of_replies_the_client_no_longer_sends_are_forgotten(
    tmp_path: Path,
) -> None:
    state = MemoryState()
    hook = make_hook(tmp_path, Router(), state)
    body = chat_body()
    own = tool_call("read", {"n": 9}, id="own1")
    await serve(
        hook, CHAT, body, lambda s: tool_calls(own, readback(chat_handle(s), 1, 3, id="rb1"))
    )
    stored = key(f"{scope_of(Key())}/conv", "readbacks")
    assert await state.get(stored) is not None
    other = tool_call("read", {"n": 10}, id="own2")  # a new history: own1's reply is gone
    await serve(
        hook, CHAT, body, lambda s: tool_calls(other, readback(chat_handle(s), 1, 3, id="rb2"))
    )
    raw = await state.get(stored)
    assert raw is not None
    assert "rb2" in raw
    assert "rb1" not in raw


def test_a_read_back_with_arguments_over_the_bound_is_kept_nowhere() -> None:
    reply = {"role": "assistant", "tool_calls": [tool_call("read", {}, id="o")]}
    huge = readback("0" * 16, pattern="x" * (MAX_ARGUMENT_BYTES + 1), id="r")
    reply["tool_calls"].append(huge)
    assert entry_of(Splice(reply, ())) is None


async def test_a_streamed_reply_mixing_read_backs_and_own_calls_keeps_only_its_own(
    tmp_path: Path,
) -> None:
    state, router = MemoryState(), Router()
    hook = make_hook(tmp_path, router, state)
    own = {"type": "tool_use", "id": "toolu_own", "name": "read_file", "input": {"p": 1}}
    served = await serve(
        hook,
        ANTHROPIC,
        anthropic_request(8),
        lambda s: sse(anthropic_reading(s, own)),
        stream=True,
    )
    events = parsed(served.reply)
    assert READBACK_TOOL_NAME not in json.dumps(events)
    uses = [
        e["content_block"] for e in events if e.get("content_block", {}).get("type") == "tool_use"
    ]
    assert [u["id"] for u in uses] == ["toolu_own"]
    assert events[-2]["delta"]["stop_reason"] == "tool_use"
    assert router.calls == []
    raw = await state.get(key(f"{scope_of(Key())}/conv", "readbacks"))
    assert raw is not None
    assert "toolu_rb" in raw


async def test_responses_a_streamed_reply_mixing_read_backs_and_own_calls_keeps_only_its_own(
    tmp_path: Path,
) -> None:
    state, router = MemoryState(), Router()
    hook = make_hook(tmp_path, router, state)
    own = {"type": "function_call", "id": "fc_o", "call_id": "call_o", "name": "shell"}
    served = await serve(
        hook,
        RESPONSES,
        responses_request(8),
        lambda s: response_events(responses_reading(s, {**own, "arguments": "{}"})),
        stream=True,
    )
    events = served.reply
    assert READBACK_TOOL_NAME not in json.dumps(events)
    added = [
        (e["output_index"], e["item"]["type"])
        for e in events
        if e["type"] == "response.output_item.added"
    ]
    assert added == [(0, "reasoning"), (1, "function_call")]
    final = events[-1]["response"]["output"]
    assert [i.get("name") for i in final if i["type"] == "function_call"] == ["shell"]
    assert router.calls == []
    raw = await state.get(key(f"{scope_of(Key())}/conv", "readbacks"))
    assert raw is not None
    assert "call_rb" in raw


async def test_an_event_stream_past_the_round_limit_is_refused_then_dropped(
    tmp_path: Path,
) -> None:
    def again(kwargs: dict[str, Any]) -> Any:
        return _aiter(sse(anthropic_reading(kwargs)))

    router = Router(anthropic=[again] * (READBACK_ROUNDS + 1))
    hook = make_hook(tmp_path, router)
    served = await serve(
        hook, ANTHROPIC, anthropic_request(8), lambda s: sse(anthropic_reading(s)), stream=True
    )
    results = [c["messages"][-1]["content"][0]["content"] for c in router.calls]
    assert len(results) == READBACK_ROUNDS + 1  # answered READBACK_ROUNDS times, then refused
    assert all(" lines 1-3 of " in r for r in results[:-1])
    assert "not answered" in results[-1]
    events = parsed(served.reply)
    assert READBACK_TOOL_NAME not in json.dumps(events)  # the last reply's read-back dropped
    kinds = [e["type"] for e in events]
    assert (kinds.count("message_start"), kinds.count("message_stop")) == (1, 1)
    (delta,) = [e for e in events if e["type"] == "message_delta"]
    assert delta["delta"]["stop_reason"] == "end_turn"
    assert [line["readback"] for line in ledger(tmp_path)] == [False] + [True] * len(results)


class Settling(MemoryState):
    """The memory state, keeping the notes each settle gave back."""

    def __init__(self) -> None:
        super().__init__()
        self.requeued: list[list[str]] = []

    async def settle(self, conversation: str, claim: str, requeue: Sequence[Any] = ()) -> None:
        self.requeued.append([n.text for n in requeue])
        await super().settle(conversation, claim, requeue)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_extra_call_that_fails_gives_the_claimed_notes_back(
    tmp_path: Path, stream: bool
) -> None:
    pytest.importorskip("fastapi")  # the 502 is FastAPI's HTTPException (the proxy extra)
    state = Settling()
    hook = make_hook(tmp_path, Router(RuntimeError("deployment down")), state)
    await state.push_note(f"{scope_of(Key())}/conv", "note", "check the logs")

    def answer(sent: dict[str, Any]) -> Any:
        reply = tool_calls(readback(chat_handle(sent), 1, 2), usage=usage(10, 1))
        return stream_chunks(reply) if stream else reply

    with pytest.raises(Exception, match="deployment down") as caught:
        await serve(hook, CHAT, chat_body(), answer, stream=stream)
    assert getattr(caught.value, "status_code", None) == 502
    assert state.requeued == [["check the logs"]]


async def test_a_streamed_message_without_read_backs_keeps_its_stop_reason(tmp_path: Path) -> None:
    router = Router()
    hook = make_hook(tmp_path, router)
    cut = {**anthropic_answer(0), "stop_reason": "max_tokens"}
    served = await serve(hook, ANTHROPIC, anthropic_request(8), lambda s: sse(cut), stream=True)
    (delta,) = [e for e in parsed(served.reply) if e["type"] == "message_delta"]
    assert delta["delta"]["stop_reason"] == "max_tokens"
    assert router.calls == []
