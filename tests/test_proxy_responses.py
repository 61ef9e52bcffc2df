"""``/v1/responses`` through the proxy hook: a Responses ``input`` in, the strategies' prompt
out as ``input`` items (no proxy process; the real proxy is in ``tests/proxy``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ctxmw.proxy._responses import ORIGIN, ResponsesTranslation
from tests._fleet_convo import FLEET_SETTINGS
from tests._long_run import SHORTENING_TIERS, assert_kept_promises, audit
from tests._proxy_routes import (
    RESPONSES,
    Key,
    first_call,
    make_hook,
    responses_answer,
    responses_events,
    rewrites,
    send,
)
from tests._route_formats import responses_problems, responses_request

pytestmark = pytest.mark.anyio

CALLS = 120


async def test_what_the_strategies_keep_goes_upstream_as_the_client_sent_it() -> None:
    body = responses_request(6)
    sent = await send(make_hook(prompt_strategies="none"), RESPONSES, body, responses_answer(0))
    assert sent.kwargs["instructions"] is body["instructions"]
    assert all(a is b for a, b in zip(sent.kwargs["input"], body["input"], strict=True))
    assert sent.record["round"] == 0


def test_a_shortened_output_and_compacted_arguments_keep_their_items() -> None:
    body = responses_request(3)
    translation = ResponsesTranslation(body["instructions"], body["input"], False)
    prompt = []
    for m in translation.messages:
        if m.get("tool_call_id") == "call_0001":
            m = {**m, "content": "[short]"}
        if m.get("tool_calls") and m["tool_calls"][0]["id"] == "call_0002":
            call = m["tool_calls"][0]
            m = {**m, "tool_calls": [{**call, "function": {**call["function"], "arguments": "{}"}}]}
        prompt.append(m)
    sent = translation.request({"instructions": body["instructions"]}, prompt)["input"]
    assert sent[6] == {**body["input"][6], "output": "[short]"}
    assert sent[7] is body["input"][7]  # the reasoning item stays just before its call
    assert sent[8] == {**body["input"][8], "arguments": "{}"}
    assert [a is b for a, b in zip(sent, body["input"], strict=True)].count(False) == 2
    assert responses_problems(sent) == []


def test_a_string_input_stays_a_string() -> None:
    translation = ResponsesTranslation("Be brief.", [{"content": "Hi"}], True)
    assert translation.request({"input": "Hi"}, translation.messages) == {"input": "Hi"}
    note = {"role": "user", "content": "A note."}
    sent = translation.request({"input": "Hi"}, [*translation.messages, note])
    assert sent["input"] == [{"role": "user", "content": "Hi"}, note]


@pytest.mark.slow  # a long generated run
async def test_a_long_conversation_is_shortened_valid_and_as_prefix_stable_as_chat() -> None:
    hook, chat_hook = make_hook(**SHORTENING_TIERS), make_hook(**SHORTENING_TIERS)
    upstream, chat_upstream, passed = [], [], []
    for n in range(CALLS):
        body = responses_request(n)
        sent = await send(hook, RESPONSES, copy.deepcopy(body), responses_answer(n))
        upstream.append(sent.kwargs["input"])
        passed.append(body["input"])
        chat = _as_chat(body)
        chat_sent = await send(chat_hook, ("acompletion", RESPONSES[1]), {"messages": chat}, {})
        chat_upstream.append(chat_sent.kwargs["messages"])
        assert sent.record["round"] == n
        assert sent.kwargs["instructions"] == body["instructions"]
    assert [responses_problems(items) for items in upstream] == [[]] * CALLS
    found = audit(upstream, passed, problems=lambda p: [])
    assert_kept_promises(found, "/v1/responses")
    assert rewrites(upstream) <= rewrites(chat_upstream)


def _as_chat(body: dict[str, Any]) -> list[Any]:
    chat = ResponsesTranslation(body["instructions"], body["input"], False).messages
    return [{k: v for k, v in m.items() if k != ORIGIN} for m in chat]


async def test_a_chained_request_is_left_alone() -> None:
    body = {"previous_response_id": "resp_1", "input": [responses_request(1)["input"][-1]]}
    sent = await send(make_hook(), RESPONSES, body, responses_answer(1))
    assert sent.kwargs["input"] is body["input"]
    assert sent.record == {}


async def test_a_streamed_answer_is_recorded_with_its_cache_reads() -> None:
    sent = await send(
        make_hook(), RESPONSES, responses_request(2), responses_events(0, read=64), stream=True
    )
    assert sent.record["cache_read_tokens"] == 64
    assert sent.record["prompt_tokens"] == 100


async def test_a_streamed_answer_of_litellms_own_events_is_recorded_with_its_cache_reads() -> None:
    # The proxy's iterator hook sees litellm's event objects, whose type is an enum.
    events = pytest.importorskip("litellm.types.llms.openai")
    answer = {**responses_answer(0, read=64), "created_at": 1, "model": "gpt-4o"}
    response = events.ResponsesAPIResponse(
        **answer, parallel_tool_calls=True, tool_choice="auto", tools=[]
    )
    completed = events.ResponseCompletedEvent(
        type=events.ResponsesAPIStreamEvents.RESPONSE_COMPLETED, response=response
    )
    sent = await send(make_hook(), RESPONSES, responses_request(2), [completed], stream=True)
    assert sent.record["cache_read_tokens"] == 64
    assert sent.record["prompt_tokens"] == 100
    assert sent.record["completion_tokens"] == 5
    assert sent.record["usage_estimated"] is False


async def test_litellms_own_chat_call_for_a_chat_only_deployment_goes_as_litellm_made_it() -> None:
    """In front of ``anthropic/`` (or any deployment without a Responses API) LiteLLM calls the
    deployment hook again, for its chat call made from what the hook returned, with the same
    logging object and call id: that call is not this route's, and goes as LiteLLM made it."""
    hook, body = make_hook(**FLEET_SETTINGS), responses_request(16)
    _, kwargs, outer = await first_call(hook, ("aresponses", "anthropic/claude-sonnet-4-5"), body)
    assert len(json.dumps(outer["input"])) < len(json.dumps(body["input"]))
    chat = {"model": "claude-sonnet-4-5", "messages": _as_chat({**body, **outer})}
    inner = {**chat, "litellm_call_id": "c", "litellm_logging_obj": kwargs["litellm_logging_obj"]}
    assert await hook.async_pre_call_deployment_hook(inner, "acompletion") is None
    # A retry of the request's own call is served again, with the same prompt.
    assert await hook.async_pre_call_deployment_hook(dict(kwargs), "aresponses") == outer


async def test_ctxmw_options_are_removed_from_a_chained_request() -> None:
    # ctxmw leaves a chained request alone, but its options never reach the provider.
    body = {"previous_response_id": "resp_1", "input": [responses_request(1)["input"][-1]]}
    data = {"model": "agent", **body, "metadata": {"ctxmw": {"epoch_size": 2}, "tag": "x"}}
    assert await make_hook().async_pre_call_hook(Key(), None, data, "aresponses") is None
    assert data["metadata"] == {"tag": "x"}
