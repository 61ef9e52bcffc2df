"""cache_breakpoints: marks at the stable prefix end and the last message, four at most."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import litellm
import pytest
import respx

from ctxmw.settings import Settings
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.strategies.cache_breakpoints import CacheBreakpoints, cache_breakpoints
from ctxmw.telemetry.marks import count_marks, is_marked
from ctxmw.types import Messages, StrategyContext
from tests import _provider_bodies as bodies
from tests._synthetic import TOOLS, session

CLAUDE = "anthropic/claude-sonnet-4-5-20250929"


def ctx(model: str | None = CLAUDE) -> StrategyContext:
    return StrategyContext(settings=Settings(), model=model)


async def epoch_prompt(rounds: int) -> tuple[Messages, Messages, StrategyContext]:
    transcript, points = session(rounds)
    transcript = transcript[: points[-1]]
    c = ctx()
    chain = resolve_strategies("shorten_tools_epoch_increment,cache_breakpoints", c.settings)
    trace: list[tuple[str, Messages]] = []
    prompt = await apply_strategies(transcript, chain, c, trace=trace)
    return trace[0][1], prompt, c


def marked(messages: Messages) -> list[int]:
    return [i for i, m in enumerate(messages) if is_marked(m)]


@pytest.mark.anyio
async def test_marks_the_stable_prefix_end_and_the_last_message() -> None:
    before, prompt, c = await epoch_prompt(120)
    stats = c.stats["shorten_tools_epoch_increment"]
    new_calls = stats["keep_full"] - c.settings.epoch_full_tool_calls
    ids = [m["tool_call_id"] for m in before if m.get("role") == "tool"]
    first_new = ids[len(ids) - new_calls]
    opener = next(
        i
        for i, m in enumerate(before)
        if any(tc["id"] == first_new for tc in m.get("tool_calls") or ())
    )
    assert marked(prompt) == [opener - 1, len(prompt) - 1]
    assert [m for i, m in enumerate(prompt) if i not in (opener - 1, len(prompt) - 1)] == [
        m for i, m in enumerate(before) if i not in (opener - 1, len(before) - 1)
    ]


def test_implicit_caching_models_are_left_alone() -> None:
    messages, _ = session(80)
    for model in ("gpt-4o", "gemini/gemini-2.5-flash", "deepseek/deepseek-chat", None):
        assert cache_breakpoints(messages, ctx(model)) is messages


def test_never_mutates_and_string_content_becomes_a_marked_part() -> None:
    messages: Messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    frozen = copy.deepcopy(messages)
    out = cache_breakpoints(messages, ctx())
    assert messages == frozen
    assert out[1]["content"] == [
        {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}
    ]
    assert out[0] is messages[0]


def test_existing_marks_are_counted_and_not_duplicated() -> None:
    messages, _ = session(120)
    pre = [dict(m) for m in messages]
    for i in (0, 1, 3):
        pre[i] = {**pre[i], "cache_control": {"type": "ephemeral"}}
    out = cache_breakpoints(pre, ctx())
    assert sum(map(count_marks, out)) == 4
    assert marked(out) == [0, 1, 3, len(out) - 1]
    already = [
        *pre[:-1],
        {**pre[-1], "cache_control": {"type": "ephemeral"}},
    ]
    assert sum(map(count_marks, cache_breakpoints(already, ctx()))) <= 4
    system_injected = CacheBreakpoints(injection_points=[{"location": "message", "role": "system"}])
    three = [pre[0], *pre[1:4], *messages[4:]]
    assert sum(map(count_marks, system_injected(three, ctx()))) == 3  # 3 own + 1 injected = 4


@pytest.mark.anyio
async def test_the_body_litellm_sends_to_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "fake-key")
    _, prompt, _ = await epoch_prompt(150)
    with respx.mock(using="httpx") as router:
        route = router.post("https://api.anthropic.com/v1/messages").mock(
            return_value=httpx.Response(200, json=bodies.ANTHROPIC)
        )
        await litellm.acompletion(model=CLAUDE, messages=prompt, tools=TOOLS)
    body = json.loads(route.calls.last.request.content)
    marks = list(_marks(body))
    assert 1 <= len(marks) <= 4
    last = body["messages"][-1]["content"][-1]
    assert "cache_control" in last
    stable = prompt[marked(prompt)[0]]
    assert any(_block_holds(block, stable) for block in marks)


def _marks(body: dict[str, Any]) -> Any:
    for section in (body.get("system") or [], body.get("tools") or []):
        yield from (b for b in section if isinstance(b, dict) and "cache_control" in b)
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, list):
            yield from (b for b in content if "cache_control" in b)


def _block_holds(block: dict[str, Any], message: dict[str, Any]) -> bool:
    if message.get("role") == "tool":
        return bool(block.get("tool_use_id") == message["tool_call_id"])
    return bool(block.get("text") == message["content"][-1]["text"])
