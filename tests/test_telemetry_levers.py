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
