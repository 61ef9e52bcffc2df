"""ctxmw.testing: the scripted completion fake users run their agents against."""

from __future__ import annotations

from typing import Any

import pytest

from ctxmw.testing import FakeCompletion, text, tool_call, tool_calls, usage

pytestmark = pytest.mark.anyio


async def test_replays_the_queue_and_records_exact_kwargs() -> None:
    fake = FakeCompletion(text("one"), text("two"))
    messages = [{"role": "user", "content": "hi"}]
    first = await fake(model="m", messages=messages, temperature=0)
    messages[0]["content"] = "changed later"
    second = await fake("m", messages)
    assert first.choices[0].message.content == "one"
    assert second.choices[0].message.content == "two"
    assert fake.calls[0] == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0,
    }
    assert fake.prompts[1] == [{"role": "user", "content": "changed later"}]
    assert fake.remaining == 0


async def test_tool_calls_and_usage_are_real_litellm_shapes() -> None:
    import litellm

    response = tool_calls(
        ("add", {"a": 1}),
        tool_call("mul", '{"x": 2}', id="fixed"),
        usage=usage(2000, 50, cached_tokens=1024, cache_write_tokens=10),
    )
    fake = FakeCompletion(response)
    got = await fake(model="m", messages=[])
    assert isinstance(got, litellm.ModelResponse)
    assert got.choices[0].finish_reason == "tool_calls"
    calls = got.choices[0].message.tool_calls
    assert [(c.function.name, c.function.arguments) for c in calls] == [
        ("add", '{"a": 1}'),
        ("mul", '{"x": 2}'),
    ]
    assert calls[1].id == "fixed"
    assert got.usage.prompt_tokens == 2000
    assert got.usage.prompt_tokens_details.cached_tokens == 1024
    assert got.usage.prompt_tokens_details.cache_write_tokens == 10


async def test_usage_is_estimated_when_not_given() -> None:
    got = await FakeCompletion(text("x")).__call__(
        model="m", messages=[{"role": "user", "content": "a" * 400}]
    )
    assert got.usage.prompt_tokens >= 100
    assert got.usage.prompt_tokens_details.cached_tokens == 0


async def test_queued_exceptions_and_callables() -> None:
    def echo(call: dict[str, Any]) -> Any:
        return text(call["messages"][-1]["content"])

    async def later(call: dict[str, Any]) -> Any:
        return text("async")

    fake = FakeCompletion(ValueError("bad request"), echo).queue(later)
    with pytest.raises(ValueError, match="bad request"):
        await fake(model="m", messages=[])
    assert (await fake(model="m", messages=[{"role": "user", "content": "ping"}])).choices[
        0
    ].message.content == "ping"
    assert (await fake(model="m", messages=[])).choices[0].message.content == "async"
    assert len(fake.calls) == 3


async def test_an_empty_queue_says_so() -> None:
    with pytest.raises(RuntimeError, match="call #1 but its queue is empty"):
        await FakeCompletion()(model="m", messages=[])


async def test_stream_reassembles_with_litellm() -> None:
    import litellm

    fake = FakeCompletion(tool_calls(("add", {"a": 1}), content="thinking", usage=usage(10, 2)))
    chunks = [c async for c in await fake(model="m", messages=[], stream=True)]
    built = litellm.stream_chunk_builder(chunks)
    message = built.choices[0].message
    assert message.content == "thinking"
    assert message.tool_calls[0].function.name == "add"
    assert built.usage.prompt_tokens == 10
