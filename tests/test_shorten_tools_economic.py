"""shorten_tools_economic: the boundary moves when the rent reaches the rewrite, never over the
window, for free on a cold cache, and the prompt is byte-stable in between."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from functools import partial
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxmw import Session, Settings, validate
from ctxmw.messages.pairs import index_tools
from ctxmw.strategies._economics import Economics
from ctxmw.strategies.shorten_tools_economic import (
    NAME,
    Sizes,
    economic_moves,
    economics,
    measure,
    shorten_tools_economic,
)
from ctxmw.testing import FakeCompletion, text
from ctxmw.types import Messages, StrategyContext
from tests.transcripts import adjacent_calls, call_points, classify, transcripts

SONNET = "anthropic/claude-sonnet-4-5"
NARROW = {
    "economic_full_tool_calls": 5,
    "economic_compacted_tool_calls": 40,
    "economic_compacted_result_chars": 400,
}
"""Tiers narrow enough that a few hundred short calls move the boundary often (and fit 30k)."""
SMALL = {
    "economic_full_tool_calls": 2,
    "economic_compacted_tool_calls": 3,
    "short_output_length": 60,
    "economic_compacted_result_chars": 60,
}


def points(messages: Messages) -> list[int]:
    return sorted({*call_points(messages), len(messages)})


def moves_of(messages: Messages, model: str | None, **overrides: Any) -> list[tuple[int, int]]:
    s = Settings(**overrides)
    sizes = measure(messages, index_tools(messages), s)
    return economic_moves(sizes, points(messages), economics(model, s), s)


def prompt_at(
    messages: Messages, model: str | None = SONNET, **kw: Any
) -> tuple[Messages, StrategyContext]:
    ctx = StrategyContext(settings=Settings(**kw.pop("overrides", {})), model=model, **kw)
    return shorten_tools_economic(messages, ctx), ctx


def test_prices_and_rule_come_from_litellm() -> None:
    econ = economics(SONNET, Settings())
    assert (econ.rule, econ.input, econ.read, econ.write) == ("breakpoints", 3e-6, 3e-7, 3.75e-6)
    assert (econ.ttl, econ.limit, econ.minimum) == (300.0, 200_000 - 4096, 1024)
    gpt = economics("gpt-4o", Settings())
    assert (gpt.rule, gpt.write) == ("openai", gpt.input)  # no write premium


def test_unpriced_model_uses_the_documented_fallback() -> None:
    econ = economics("hosted_vllm/my-model", Settings())
    assert (econ.rule, econ.input, econ.read, econ.write, econ.ttl) == (
        "exact",
        1.0,
        0.1,
        1.0,
        math.inf,
    )


def test_cache_ttl_setting_overrides_the_provider() -> None:
    assert economics(SONNET, Settings(cache_ttl=3600)).ttl == 3600


def test_short_session_is_sent_unchanged() -> None:
    source = adjacent_calls(60)
    prompt, _ = prompt_at(source)
    assert prompt == source  # the rewrite never paid back: nothing moved


def test_a_subagent_report_stays_whole_in_the_compacted_tier_and_drops_with_it() -> None:
    source = adjacent_calls(30)
    for msg in source:  # calls 3 and 20 ask a subagent
        for tc in msg.get("tool_calls") or ():
            if tc["id"] in ("call_3", "call_20"):
                tc["function"]["name"] = "Task"
    overrides = {"cache_rule": "none", **SMALL, "economic_compacted_tool_calls": 12}
    regions = classify(source, prompt_at(source, overrides=overrides)[0])
    assert 20 in regions["full"]
    assert {18, 19, 21} <= set(regions["compacted"])
    assert 3 in regions["dropped"]
    regions = classify(
        source, prompt_at(source, overrides={**overrides, "economic_whole_tools": []})[0]
    )
    assert 20 in regions["compacted"]


def test_without_a_cache_every_call_that_reclaims_moves() -> None:
    source = adjacent_calls(30)
    moves = moves_of(source, SONNET, cache_rule="none", **SMALL)
    reclaiming = [p for p in points(source) if index_tools(source[:p]).calls[2:]]
    assert [p for p, _ in moves] == reclaiming


def test_each_move_comes_when_the_rent_reaches_the_rewrite() -> None:
    source = adjacent_calls(400)
    s = Settings(economic_guard=None, economic_guard_automatic=None)  # the rent rule alone
    sizes = measure(source, index_tools(source), s)
    econ = economics(SONNET, s)
    moves = economic_moves(sizes, points(source), econ, s)
    assert len(moves) >= 3
    boundary, rent, at = 0, 0.0, dict(moves)
    for p in points(source):
        n = sizes.calls_before(p)
        stay, moved = sizes.prompt(p, boundary, s), sizes.prompt(p, n, s)
        if moved >= stay:
            assert p not in at
            continue
        rent += (stay - moved) * econ.read
        purchase = moved * (econ.write - econ.read)  # breakpoints: the head is rewritten too
        assert (p in at) == (rent >= s.economic_break_even * purchase), p
        if p in at:
            boundary, rent = at[p], 0.0


def test_the_tiers_are_its_own_settings_not_the_epoch_strategies() -> None:
    source = adjacent_calls(400)
    overrides = {"epoch_full_tool_calls": 3, "economic_compacted_result_chars": 60}
    prompt, ctx = prompt_at(source, overrides=overrides)
    boundary = ctx.stats[NAME]["pinned"]
    regions = classify(source, prompt)
    # Every call after the boundary and the tier before it are full; then the compacted tier.
    full, compacted = Settings().economic_full_tool_calls, Settings().economic_compacted_tool_calls
    assert regions["full"] == list(range(boundary - full + 1, 401))
    assert regions["compacted"] == list(range(boundary - full - compacted + 1, boundary - full + 1))
    s = Settings(
        economic_full_tool_calls=4,
        economic_compacted_tool_calls=7,
        economic_compacted_result_chars=60,
    )
    narrow, c = prompt_at(source, overrides=s.model_dump())
    regions = classify(source, narrow)
    pinned = c.stats[NAME]["pinned"]
    assert (regions["full"][0], len(regions["compacted"])) == (pinned - 3, 7)


def test_cache_breakpoints_marks_the_stable_prefix_of_the_default() -> None:
    from ctxmw.strategies._chain import apply_strategies, resolve_strategies

    source = adjacent_calls(400)
    s = Settings(economic_guard=None, economic_guard_automatic=None)  # the rent rule alone
    ctx = StrategyContext(settings=s, model=SONNET)
    chain = resolve_strategies("shorten_tools_economic,cache_breakpoints", s)
    trace: list[tuple[str, Messages]] = []
    prompt = anyio.run(partial(apply_strategies, source, chain, ctx, trace=trace))
    shortened = trace[0][1]
    first_new = f"call_{ctx.stats[NAME]['pinned'] + 1}"
    opener = next(
        i
        for i, m in enumerate(shortened)
        if any(tc["id"] == first_new for tc in m.get("tool_calls") or ())
    )
    marks = [i for i, m in enumerate(prompt) if "cache_control" in json.dumps(m)]
    assert marks[0] == opener - 1  # the end of the prefix that stays until the next move


def test_a_breakpoint_move_pays_for_rewriting_the_head_too() -> None:
    # No mark sits at the head's end, so after a move the head is written again, not read.
    source = _big_head(120)
    s = Settings(economic_guard=None, economic_guard_automatic=None, **NARROW)  # rent alone
    sizes = measure(source, index_tools(source), s)
    econ = economics(SONNET, s)
    moves = economic_moves(sizes, points(source), econ, s)
    assert moves
    for p, _, moved, rent in _rent_walk(source, sizes, econ, s, moves):
        if p in dict(moves):
            assert rent >= s.economic_break_even * moved * (econ.write - econ.read), p
    # Automatic prefix caching reads the head back: the same session moves sooner.
    gpt = moves_of(
        source,
        SONNET,
        cache_rule="openai",
        economic_guard=None,
        economic_guard_automatic=None,
        **NARROW,
    )
    assert gpt[0][0] < moves[0][0]


def _rent_walk(
    source: Messages, sizes: Sizes, econ: Economics, s: Settings, moves: list[tuple[int, int]]
) -> Iterator[tuple[int, float, float, float]]:
    """Per call point, given the schedule's moves: the prompt if the boundary stays, the prompt
    if it moves now, and the rent paid since the last move (this point's included)."""
    boundary, rent, at = 0, 0.0, dict(moves)
    for p in points(source):
        stay, moved = sizes.prompt(p, boundary, s), sizes.prompt(p, sizes.calls_before(p), s)
        if moved < stay:
            rent += (stay - moved) * econ.read
        yield p, stay, moved, rent
        if p in at:
            boundary, rent = at[p], 0.0


def _big_head(calls: int) -> Messages:
    source = adjacent_calls(calls)
    source[0] = {"role": "system", "content": "rules " * 8000}
    return source


def test_a_marked_head_is_read_back_after_a_breakpoint_move() -> None:
    # Told that the client marks the head's end (cache_breakpoints does), a breakpoint move is
    # priced as rewriting only what follows the head, and the same session moves sooner.
    source = _big_head(120)
    free = {"economic_guard": None, "economic_guard_automatic": None}
    s = Settings(economic_head_mark=True, **free, **NARROW)
    sizes = measure(source, index_tools(source), s)
    econ = economics(SONNET, s)
    moves = economic_moves(sizes, points(source), econ, s)
    assert moves
    for p, stay, moved, rent in _rent_walk(source, sizes, econ, s, moves):
        if moved >= stay:
            continue
        purchase = (moved - sizes.head) * (econ.write - econ.read)
        assert (p in dict(moves)) == (rent >= s.economic_break_even * purchase), p
    assert moves[0][0] < moves_of(source, SONNET, **free, **NARROW)[0][0]


def _first_move(source: Messages, spec: str, **overrides: Any) -> int:
    """Where the boundary first moves (call points in order) under the chain ``spec``."""
    from ctxmw.strategies._chain import apply_strategies, resolve_strategies

    s = Settings(**{**NARROW, **overrides})
    memo: dict[str, Any] = {}
    for p in call_points(source):
        ctx = StrategyContext(settings=s, model=SONNET, memo=memo)
        anyio.run(partial(apply_strategies, source[:p], resolve_strategies(spec, s), ctx))
        if ctx.stats.get(NAME, {}).get("moves"):
            return p
    return len(source)


def test_cache_breakpoints_later_in_the_chain_marks_the_head() -> None:
    # The chain says that the head's end will be marked: the move is priced as reading it back.
    source = _big_head(120)
    alone = _first_move(source, "shorten_tools_economic")
    marked = _first_move(source, "shorten_tools_economic,cache_breakpoints")
    assert marked < alone
    # The setting beats the chain, either way.
    told = _first_move(source, "shorten_tools_economic", economic_head_mark=True)
    assert told == marked
    off = {"economic_head_mark": False}
    assert _first_move(source, "shorten_tools_economic,cache_breakpoints", **off) == alone
    # Before the strategy it marks the input, which the strategy rewrites: no inference.
    assert _first_move(source, "cache_breakpoints,shorten_tools_economic") == alone


def test_the_head_mark_changes_nothing_under_automatic_caching() -> None:
    source = _big_head(120)
    marked = Settings(economic_head_mark=True)
    assert economics("gpt-4o", marked) == economics("gpt-4o", Settings())
    assert moves_of(source, "gpt-4o", economic_head_mark=True) == moves_of(source, "gpt-4o")


def test_automatic_caching_has_its_own_tighter_guard() -> None:
    # Under automatic caching a move reads the head back and writes at the input price, so
    # the default guard there is 1.02, the bound per conversation; under breakpoints it
    # stays economic_guard.
    defaults = Settings()
    assert economics("gpt-4o", defaults).guard == defaults.economic_guard_automatic
    assert economics(SONNET, defaults).guard == defaults.economic_guard
    # Under the 1.05 bound this session's estimate reached 1.044x none (a move at 51 calls).
    costs = running_costs(_uniform(51, 6000), SONNET, cache_rule="openai")
    assert all(ours <= 1.02 * none + slack + 1e-12 for ours, none, slack in costs)


def test_a_long_session_is_compacted_and_stays_valid() -> None:
    source = adjacent_calls(400)
    prompt, ctx = prompt_at(source)
    validate(prompt)
    assert len(json.dumps(prompt)) < len(json.dumps(source)) / 3
    assert ctx.stats[NAME]["rule"] == "breakpoints"
    assert ctx.stats[NAME]["moves"] >= 3


def test_never_over_the_window_while_the_tiers_fit() -> None:
    source = adjacent_calls(200)
    s = Settings(context_window=30_000, **NARROW)
    sizes = measure(source, index_tools(source), s)
    econ = economics(SONNET, s)
    moves = economic_moves(sizes, points(source), econ, s)
    boundary, at = 0, dict(moves)
    for p in points(source):
        boundary = at.get(p, boundary)
        assert sizes.prompt(p, boundary, s) <= econ.limit
    # Without the window it would have waited longer: the window forced a move.
    assert [p for p, _ in moves] != [p for p, _ in moves_of(source, SONNET)]


def test_a_cold_cache_takes_the_pending_compaction() -> None:
    source = adjacent_calls(60)
    memo: dict[str, Any] = {}
    first, _ = prompt_at(source[:-4], memo=memo, now=0.0)
    assert first == source[:-4]
    warm, _ = prompt_at(source[:-2], memo=dict(memo), now=10.0)
    assert warm == source[:-2]  # under the TTL: no move
    cold, ctx = prompt_at(source[:-2], memo=memo, now=1000.0)  # idle 1,000 s > 300 s
    assert ctx.stats[NAME]["cold"]
    assert len(json.dumps(cold)) < len(json.dumps(source[:-2]))
    # Remembered: the next (warm) call extends the cold call's prompt byte for byte.
    after, _ = prompt_at(source, memo=memo, now=1010.0)
    assert after[: len(cold)] == cold


def test_a_model_switch_is_a_cold_cache() -> None:
    source = adjacent_calls(60)
    memo: dict[str, Any] = {}
    prompt_at(source[:-2], memo=memo, now=0.0)
    switched, ctx = prompt_at(source, model="gpt-4o", memo=memo, now=1.0)
    assert ctx.stats[NAME]["cold"]
    assert switched != source


def test_a_session_passes_its_clock_to_the_strategies() -> None:
    seen: list[float | None] = []

    def spy(messages: Messages, ctx: StrategyContext) -> Messages:
        seen.append(ctx.now)
        return messages

    session = Session(
        "gpt-4o", prompt_strategies=[spy], completion=FakeCompletion(text("hi")), clock=lambda: 42.0
    )
    anyio.run(session.ask, "hello")
    assert seen == [42.0]


@pytest.mark.slow  # a property test with many examples
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=transcripts(max_turns=60), gaps=st.lists(st.booleans(), max_size=80))
def test_byte_stable_between_moves_with_cold_gaps(messages: Messages, gaps: list[bool]) -> None:
    memo: dict[str, Any] = {}
    now, previous, previous_moves = 0.0, None, None
    for i, point in enumerate(call_points(messages)):
        now += 1000.0 if i < len(gaps) and gaps[i] else 1.0
        prompt, ctx = prompt_at(messages[:point], memo=memo, now=now, overrides=SMALL)
        validate(prompt)
        moves = ctx.stats.get(NAME, {}).get("moves", 0)
        if previous is not None and moves == previous_moves:
            assert prompt[: len(previous)] == previous
        previous, previous_moves = prompt, moves


def test_bad_economic_settings_name_the_variable(monkeypatch: Any) -> None:
    import pytest

    from ctxmw import SettingsError

    with pytest.raises(SettingsError, match="economic_break_even"):
        Settings(economic_break_even=0)
    monkeypatch.setenv("CTXMW_CACHE_TTL", "-5")
    with pytest.raises(SettingsError, match="CTXMW_CACHE_TTL"):
        Settings()


def _price(econ: Any, prompt: float, cached: float) -> float:
    """One prompt's estimated cost, written apart from the strategy's own."""
    if not econ.caches(prompt):
        return float(prompt * econ.input)
    reads = cached if econ.caches(cached) else 0.0
    return float(reads * econ.read + (prompt - reads) * econ.write)


def running_costs(
    messages: Messages, model: str | None, cold: frozenset[int] = frozenset(), **overrides: Any
) -> list[tuple[float, float, float]]:
    """(the schedule's, none's) estimated cost so far at every call point, and the part of the
    schedule's spent on calls whose prompt, or previous prompt, is under the cache minimum."""
    s = Settings(**overrides)
    sizes = measure(messages, index_tools(messages), s)
    econ = economics(model, s)
    at = dict(economic_moves(sizes, points(messages), econ, s, cold))
    # Automatic caches read the head back after a move; a breakpoint move rewrites it, unless
    # the client marks the head.
    marked = econ.rule != "breakpoints" or s.economic_head_mark
    head = sizes.head if marked and econ.caches(sizes.head) else 0.0
    boundary, sent, plain_sent, ours, none, slack, out = 0, 0.0, 0.0, 0.0, 0.0, 0.0, []
    for p in points(messages):
        plain = sizes.prompt(p, 0, s)
        none += _price(econ, plain, 0.0 if p in cold else plain_sent)
        cached = 0.0 if p in cold else (min(head, sent) if p in at else sent)
        boundary = at.get(p, boundary)
        prompt = sizes.prompt(p, boundary, s)
        cost = _price(econ, prompt, cached)
        ours += cost
        if not econ.caches(prompt) or (p not in cold and not econ.caches(sent)):
            slack += cost
        sent, plain_sent = prompt, plain
        out.append((ours, none, slack))
    return out


@pytest.mark.slow  # a property test with many examples
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=transcripts(max_turns=60), cold=st.sets(st.integers(0, 400), max_size=5))
def test_the_running_cost_never_exceeds_the_guard_times_none(
    messages: Messages, cold: set[int]
) -> None:
    # The bound docs/design/economics.md states, in the schedule's own estimate: at every call
    # point, not counting calls under the cache minimum (nothing of them is cached either way).
    defaults = Settings()
    for guard in (1.0, 1.02, defaults.economic_guard, defaults.economic_guard_automatic):
        for model, marked in ((None, False), (SONNET, False), (SONNET, True)):
            tight = {
                **SMALL,
                "economic_guard": guard,
                "economic_guard_automatic": guard,
                "economic_head_mark": marked,
            }
            for ours, none, slack in running_costs(messages, model, frozenset(cold), **tight):
                assert ours <= guard * none + slack + 1e-12


def _uniform(calls: int, chars: int) -> Messages:
    source = adjacent_calls(calls)
    for m in source:
        if m["role"] == "tool":
            m["content"] = "x" * chars + m["content"][-12:]
    return [*source, {"role": "assistant", "content": "Done."}]


def test_a_move_that_would_cost_more_than_none_waits() -> None:
    from ctxmw.replay import replay
    from ctxmw.telemetry.counters import ApproxCounter

    # Ending just after the break-even move, this session cost 1.038x none under automatic
    # caching: the rewrite was bought and the session ended before it paid back. The guard
    # (1.02 under automatic caching) bounds the schedule's estimate; the replay counts 4 bytes
    # a token of each message's JSON (ids, names), which the estimate leaves out: with the 5/40
    # tiers the 20-call session, moving at its last call, costs 1.024x (estimated 0.990x).
    # Read-back is off: its tool's schema, sent on every call, is a cost of its own (about 2%
    # of these 5k-token prompts), not one of the move.
    for calls in range(17, 30):
        result = anyio.run(
            partial(
                replay,
                {"t": _uniform(calls, 1000)},
                ["default"],
                model="gpt-4o",
                counter=ApproxCounter(),
                settings={"economic_guard_automatic": 1.02, "readback": False},
                optimal=False,
            )
        )
        ratio = result.strategies["default"].cost["auto"] / result.strategies["none"].cost["auto"]
        assert ratio <= 1.03, calls


def test_the_guard_lets_a_long_session_move() -> None:
    # Savings banked: the guard does not stop a long session from being compacted.
    guarded = moves_of(_uniform(300, 1000), "gpt-4o", economic_guard_automatic=1.02)
    assert guarded
    free = moves_of(_uniform(300, 1000), "gpt-4o", economic_guard_automatic=None)
    assert free[0][0] <= guarded[0][0]
