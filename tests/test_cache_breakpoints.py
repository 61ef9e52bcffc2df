"""cache_breakpoints: marks at the stable prefix end and the last message, four at most."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import httpx
import litellm
import pytest
import respx

from ctxmw.settings import Settings
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.strategies.cache_breakpoints import CacheBreakpoints, cache_breakpoints
from ctxmw.telemetry.marks import (
    MAX_BREAKPOINTS,
    count_marks,
    is_marked,
    plan_marks,
    within_lookback,
)
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
    # The stable head (1h), the tail (5m) and, the epoch's new calls being longer than the
    # 20-block lookback, 5m bridges between them, each within the lookback of the next.
    marks = marked(prompt)
    assert (marks[0], marks[-1]) == (opener - 1, len(prompt) - 1)
    assert len(marks) == 4
    assert all(within_lookback(prompt, a, b) for a, b in itertools.pairwise(marks))
    ttls = [part["cache_control"].get("ttl", "5m") for part in _mark_parts(prompt, marks)]
    assert ttls == ["1h", "5m", "5m", "5m"]
    assert c.stats["cache_breakpoints"]["marks"] == [
        [i, t] for i, t in zip(marks, ttls, strict=True)
    ]
    assert [m for i, m in enumerate(prompt) if i not in marks] == [
        m for i, m in enumerate(before) if i not in marks
    ]


def _mark_parts(prompt: Messages, marks: list[int]) -> list[dict[str, Any]]:
    out = []
    for i in marks:
        content = prompt[i].get("content")
        out.append(content[-1] if isinstance(content, list) else prompt[i])
    return out


def test_no_bridge_when_the_tail_is_within_the_lookback_of_the_head() -> None:
    messages, _ = session(30)
    plan = plan_marks(messages[:12], head=3)
    assert plan == [(3, "1h"), (11, "5m")]
    assert plan_marks(messages[:12], head=None) == [(11, "5m")]


def test_a_long_step_gets_bridges_within_the_mark_limit() -> None:
    messages, _ = session(120)
    plan = plan_marks(messages, head=None)
    assert len(plan) == MAX_BREAKPOINTS
    indices = [i for i, _ in plan]
    assert all(within_lookback(messages, a, b) for a, b in itertools.pairwise(indices))
    assert plan_marks(messages, head=None, budget=2) == plan[-2:]
    assert (
        plan_marks(messages, head=None, taken={len(messages) - 1}, budget=1)[0][0]
        < len(messages) - 1
    )


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
    assert marks[0]["cache_control"]["ttl"] == "1h"  # litellm keeps it


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


def _long_head_session(calls: int) -> Messages:
    from tests.transcripts import adjacent_calls

    source = adjacent_calls(calls)
    source[0] = {"role": "system", "content": "rules " * 8000}  # ~12k tokens: worth a mark
    return source


@pytest.mark.anyio
async def test_the_head_is_marked_before_the_compaction_notice() -> None:
    c = ctx()
    chain = resolve_strategies("shorten_tools_economic,cache_breakpoints", c.settings)
    trace: list[tuple[str, Messages]] = []
    prompt = await apply_strategies(_long_head_session(400), chain, c, trace=trace)
    compacted = trace[0][1]
    notice = next(i for i, m in enumerate(compacted) if m.get("role") == "user" and i > 1)
    assert compacted[notice]["content"].startswith("[")  # the notice, just after the task
    assert [1, "1h"] in c.stats["cache_breakpoints"]["marks"]
    assert is_marked(prompt[1])
    assert not is_marked(prompt[notice])
    assert len(marked(prompt)) <= MAX_BREAKPOINTS


def test_a_small_head_or_no_tool_group_gets_no_head_mark() -> None:
    from tests.transcripts import adjacent_calls

    for messages in (
        adjacent_calls(30),  # a head of a few tokens is under the cache minimum
        [{"role": "system", "content": "rules " * 8000}, {"role": "user", "content": "hi"}],
    ):
        c = ctx()
        cache_breakpoints(messages, c)
        assert [t for _, t in c.stats["cache_breakpoints"]["marks"]] == ["5m"] * len(
            c.stats["cache_breakpoints"]["marks"]
        )


@pytest.mark.anyio
async def test_a_boundary_move_reads_the_head_back_under_breakpoints() -> None:
    from ctxmw.replay import replay
    from ctxmw.telemetry.counters import ApproxCounter

    result = await replay(
        {"t": _long_head_session(400)},
        ["default"],
        model=CLAUDE,
        counter=ApproxCounter(),
        optimal=False,
    )
    moves = [c for c in result.strategies["default"].calls if c.broke]
    assert moves
    # Every move re-reads at least the head (~12k tokens) instead of writing it again.
    assert all(c.splits["breakpoints"].reads >= 10_000 for c in moves)
