"""``/v1/messages`` through the proxy hook: Anthropic's own format in, the strategies' prompt out
in the same format (no proxy process; the real proxy is in ``tests/proxy``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ctxmw.proxy._anthropic import ORIGIN, AnthropicTranslation
from tests._fleet_convo import FLEET_SETTINGS
from tests._long_run import SHORTENING_TIERS, assert_kept_promises, audit
from tests._proxy_routes import (
    ANTHROPIC,
    Key,
    anthropic_answer,
    anthropic_events,
    first_call,
    make_hook,
    rewrites,
    send,
)
from tests._route_formats import anthropic_problems, anthropic_request

pytestmark = pytest.mark.anyio

CALLS = 120


async def test_what_the_strategies_keep_goes_upstream_as_the_client_sent_it() -> None:
    body = anthropic_request(6)
    sent = await send(make_hook(prompt_strategies="none"), ANTHROPIC, body, anthropic_answer(0))
    assert sent.kwargs["system"] is body["system"]
    assert all(a is b for a, b in zip(sent.kwargs["messages"], body["messages"], strict=True))
    assert sent.record["round"] == 0


def shorten(translation: AnthropicTranslation, call_id: str) -> list[Any]:
    """The chat prompt with one tool result shortened, as a strategy does it."""
    return [
        {**m, "content": "[short]"} if m.get("tool_call_id") == call_id else m
        for m in translation.messages
    ]


def test_a_shortened_result_keeps_its_block_and_its_neighbours() -> None:
    body = anthropic_request(6)
    results = body["messages"][10]["content"]  # round 4: a result, then a reminder
    results[0] = {**results[0], "is_error": True}
    translation = AnthropicTranslation(body["system"], body["messages"])
    sent = translation.request({}, shorten(translation, "toolu_0004"))["messages"]
    assert sent[10]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_0004",
            "content": "[short]",
            "is_error": True,
        },
        results[1],
    ]
    kept = [a is b for a, b in zip(sent, body["messages"], strict=True)]
    assert kept == [i != 10 for i in range(len(kept))]
    assert anthropic_problems({**body, "messages": sent}) == []


def test_compacted_arguments_become_the_input_and_thinking_stays_as_signed() -> None:
    body = anthropic_request(3)
    translation = AnthropicTranslation(body["system"], body["messages"])
    prompt = []
    for m in translation.messages:
        if m.get("tool_calls") and m["tool_calls"][0]["id"] == "toolu_0001":
            call = m["tool_calls"][0]
            short = {**call, "function": {**call["function"], "arguments": '{"path": "x"}'}}
            parts = [
                {**p, "thinking": "edited"} if p["type"] == "thinking" else p for p in m["content"]
            ]
            m = {**m, "tool_calls": [short], "content": parts}
        prompt.append(m)
    sent = translation.request({}, prompt)["messages"]
    blocks = sent[3]["content"]
    assert blocks[0] == body["messages"][3]["content"][0]  # the signed thinking, untouched
    assert blocks[2]["input"] == {"path": "x"}
    assert blocks[2]["id"] == "toolu_0001"
    assert anthropic_problems({**body, "messages": sent}) == []


def test_a_mark_added_by_a_strategy_lands_on_the_block() -> None:
    body = anthropic_request(2)
    translation = AnthropicTranslation(body["system"], body["messages"])
    mark = {"type": "ephemeral", "ttl": "1h"}
    prompt = [
        {**m, "cache_control": mark} if m.get("tool_call_id") == "toolu_0000" else m
        for m in translation.messages
    ]
    sent = translation.request({}, prompt)["messages"]
    assert sent[2]["content"][0]["cache_control"] == mark
    assert sent[2]["content"][0]["content"] == body["messages"][2]["content"][0]["content"]


@pytest.mark.slow  # a long generated run
async def test_a_long_conversation_is_shortened_valid_and_as_prefix_stable_as_chat() -> None:
    hook, chat_hook = make_hook(**SHORTENING_TIERS), make_hook(**SHORTENING_TIERS)
    upstream, chat_upstream, passed = [], [], []
    for n in range(CALLS):
        body = anthropic_request(n)
        sent = await send(hook, ANTHROPIC, copy.deepcopy(body), anthropic_answer(n))
        upstream.append(sent.kwargs)
        passed.append(body["messages"])
        chat = _as_chat(body)
        chat_sent = await send(chat_hook, ("acompletion", ANTHROPIC[1]), {"messages": chat}, {})
        chat_upstream.append(chat_sent.kwargs["messages"])
        assert sent.record["round"] == n
    assert [anthropic_problems(k) for k in upstream] == [[]] * CALLS
    found = audit([k["messages"] for k in upstream], passed, problems=lambda p: [])
    assert_kept_promises(found, "/v1/messages")
    assert rewrites([k["messages"] for k in upstream]) <= rewrites(chat_upstream)


def _as_chat(body: dict[str, Any]) -> list[Any]:
    """The same conversation as a chat client would send it."""
    chat = AnthropicTranslation(body["system"], body["messages"]).messages
    return [{k: v for k, v in m.items() if k != ORIGIN} for m in chat]


async def test_a_streamed_answer_is_recorded_with_its_cache_reads() -> None:
    sent = await send(
        make_hook(), ANTHROPIC, anthropic_request(2), anthropic_events(0, read=40), stream=True
    )
    assert sent.record["cache_read_tokens"] == 40
    assert sent.record["cache_write_tokens"] == 7
    assert sent.record["prompt_tokens"] == 147


async def test_a_block_that_is_not_an_object_is_a_400() -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException  # the proxy extra
    body = {"messages": [{"role": "user", "content": ["not a block"]}]}
    with pytest.raises(HTTPException) as caught:
        await send(make_hook(), ANTHROPIC, body, anthropic_answer(0))
    assert caught.value.status_code == 400
    assert "messages[0].content" in json.dumps(caught.value.detail)


@pytest.mark.parametrize("inner", ["acompletion", "aresponses"])
async def test_litellms_own_call_for_an_openai_deployment_goes_as_litellm_made_it(
    inner: str,
) -> None:
    """In front of an OpenAI-compatible deployment LiteLLM translates the request to chat (or to
    the Responses API for ``openai/``) and calls the deployment hook again, with the same
    logging object and call id: that call is not this route's, and goes as LiteLLM made it."""
    hook, body = make_hook(**FLEET_SETTINGS), anthropic_request(16)
    _, kwargs, outer = await first_call(hook, ("anthropic_messages", "openai/fake-model"), body)
    translated = _as_chat({**body, **outer})
    assert any(m["role"] == "tool" for m in translated)
    made = {"messages": translated} if inner == "acompletion" else {"input": [{"role": "user"}]}
    again = {**made, "litellm_call_id": "c", "litellm_logging_obj": kwargs["litellm_logging_obj"]}
    assert await hook.async_pre_call_deployment_hook(again, inner) is None


async def test_a_whole_answer_litellm_translated_is_measured_from_the_chat_response() -> None:
    """LiteLLM's Anthropic shape of a translated answer leaves out cache reads of 0; the chat
    response it came from, kept on the request's logging object, reports them."""

    class Request:  # the proxy's logging object, as the chat bridge leaves it
        def __init__(self) -> None:
            usage = {"prompt_tokens": 100, "completion_tokens": 5}
            self.bridged_model_response = {
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
                "usage": {**usage, "prompt_tokens_details": {"cached_tokens": 0}},
            }

    served = {**anthropic_answer(0), "usage": {"input_tokens": 100, "output_tokens": 5}}
    hook, request = make_hook(), Request()
    route = ("anthropic_messages", "openai/fake-model")
    data, _, _ = await first_call(hook, route, anthropic_request(2), request)
    await hook.async_post_call_success_hook(data, Key(), served)
    record = data["metadata"]["spend_logs_metadata"]["ctxmw"]
    assert (record["prompt_tokens"], record["cache_read_tokens"]) == (100, 0)
