"""Provider levers: a stable prompt_cache_key, the previous reply counted for ``exact``, marks."""

from __future__ import annotations

from typing import Any

import pytest

from ctxmw.settings import Settings
from ctxmw.telemetry import ApproxCounter, CallRecorder
from ctxmw.telemetry.levers import conversation_key, takes_prompt_cache_key
from ctxmw.telemetry.marks import payload_marks, with_mark
from ctxmw.testing import text, usage

HEAD = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Task one."}]


def test_the_key_is_stable_over_a_conversation_and_differs_between_conversations() -> None:
    later = [*HEAD, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    other = [HEAD[0], {"role": "user", "content": "Task two."}]
    assert conversation_key(HEAD) == conversation_key(later)
    assert conversation_key(HEAD) != conversation_key(other)
    assert conversation_key(HEAD).startswith("ctxmw-")
    assert "Task" not in conversation_key(HEAD)


def test_which_providers_take_a_key() -> None:
    assert takes_prompt_cache_key("gpt-4o", "openai")
    assert takes_prompt_cache_key("openai/gpt-4o", "openai")
    assert not takes_prompt_cache_key("claude-sonnet-4-5", "anthropic")
    assert not takes_prompt_cache_key("smollm2", "openai", "http://127.0.0.1:8011/v1")
    assert not takes_prompt_cache_key("llama3", "ollama")


def test_prepare_kwargs_adds_the_key_for_openai_only() -> None:
    recorder = CallRecorder("s")
    sent = recorder.prepare_kwargs({"model": "gpt-4o", "messages": HEAD})
    assert sent["prompt_cache_key"] == conversation_key(HEAD)
    anthropic = recorder.prepare_kwargs({"model": "anthropic/claude-sonnet-4-5", "messages": HEAD})
    assert "prompt_cache_key" not in anthropic


def test_the_callers_key_wins_and_the_setting_turns_it_off() -> None:
    kwargs: dict[str, Any] = {"model": "gpt-4o", "messages": HEAD, "prompt_cache_key": "mine"}
    assert CallRecorder("s").prepare_kwargs(kwargs)["prompt_cache_key"] == "mine"
    off = CallRecorder("s", settings=Settings(prompt_cache_key=False))
    assert "prompt_cache_key" not in off.prepare_kwargs({"model": "gpt-4o", "messages": HEAD})


async def _exact_calls(replies: list[str], follow: list[str]) -> list[Any]:
    """A self-hosted session: each call's history goes on with ``follow[i]`` as the reply."""
    recorder = CallRecorder("s", token_counter=ApproxCounter())
    msgs: list[dict[str, Any]] = list(HEAD)
    records = []
    for reply, appended in zip(replies, follow, strict=True):
        kwargs = {"model": "openai/smollm2", "messages": msgs, "api_base": "http://127.0.0.1:9/v1"}
        response = text(reply, usage=usage(500, 40, cached_tokens=0))
        records.append(
            await recorder.record(
                model="openai/smollm2", wire_kwargs=kwargs, transcript=msgs, response=response
            )
        )
        msgs = [
            *msgs,
            {"role": "assistant", "content": appended},
            {"role": "user", "content": "go"},
        ]
    return records


@pytest.mark.anyio
async def test_exact_counts_the_previous_reply_a_token_cache_kept() -> None:
    long_reply = "word " * 200
    records = await _exact_calls([long_reply, "fine"], [long_reply, "fine"])
    second = records[1]
    assert second.cache_rule == "exact"
    reply_tokens = ApproxCounter().message_tokens(
        "openai/smollm2", {"role": "assistant", "content": long_reply}
    )
    assert second.expected_cached_tokens == second.prefix_tokens_local + reply_tokens


@pytest.mark.anyio
async def test_a_reply_the_caller_changed_is_not_counted() -> None:
    long_reply = "word " * 200
    records = await _exact_calls([long_reply, "fine"], ["something else " * 50, "fine"])
    assert records[1].expected_cached_tokens == records[1].prefix_tokens_local


def test_marks_with_their_ttl() -> None:
    head = with_mark({"role": "system", "content": "sys"}, ttl="1h")
    tail = with_mark({"role": "user", "content": "q"})
    assert head["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert payload_marks([head, {"role": "user", "content": "x"}, tail]) == (
        {"index": 0, "ttl": "1h"},
        {"index": 2, "ttl": "5m"},
    )
    assert payload_marks([{"role": "user", "content": "x"}]) is None
    injected = payload_marks([{"role": "user", "content": "x"}], None, [{"index": -1}])
    assert injected == ({"index": 0, "ttl": "5m"},)


def _tool_round(i: int) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"},
    ]


async def _claude_second_call(bridge: int | None) -> Any:
    recorder = CallRecorder("s", token_counter=ApproxCounter())
    model = "anthropic/claude-sonnet-4-5"
    first = [{"role": "system", "content": "rules " * 2000}, with_mark(HEAD[1])]
    rounds = [m for i in range(12) for m in _tool_round(i)]
    second = [first[0], HEAD[1], *rounds]
    second[-1] = with_mark(second[-1])
    if bridge is not None:
        second[bridge] = with_mark(second[bridge])
    for msgs in (first, second):
        record = await recorder.record(
            model=model, wire_kwargs={"model": model, "messages": msgs}, transcript=msgs
        )
    return record


@pytest.mark.anyio
async def test_breakpoints_reads_nothing_past_the_20_block_lookback() -> None:
    far = await _claude_second_call(bridge=None)  # 24 blocks from the old mark to the new one
    assert far.cache_rule == "breakpoints"
    assert far.prefix_tokens_local > 2000
    assert far.expected_cached_tokens == 0


@pytest.mark.anyio
async def test_a_bridge_within_the_lookback_finds_the_previous_mark() -> None:
    near = await _claude_second_call(bridge=12)
    assert near.expected_cached_tokens > 2000
    assert near.cache_marks == ({"index": 12, "ttl": "5m"}, {"index": 25, "ttl": "5m"})


def test_a_provider_that_takes_no_key_is_turned_away_without_litellm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "litellm", None)  # importing it now would raise
    kwargs = {"model": "fake/model", "messages": HEAD}
    assert CallRecorder("s").prepare_kwargs(kwargs) is kwargs
    assert CallRecorder("s").prepare_kwargs({"model": "ollama/llama3", "messages": HEAD}) == {
        "model": "ollama/llama3",
        "messages": HEAD,
    }
