"""Alert rules per session: each fires once when its condition starts, on ledger dicts."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ctxmw.settings import Settings
from ctxmw.telemetry import ApproxCounter, CallRecorder
from ctxmw.telemetry.alerts import AlertRules, AlertState, evaluate

RULES = AlertRules(window=3, min_hit_rate=0.5, max_drift=0.1, write_fraction=0.5)


def rec(
    read: int | None,
    *,
    prompt: int = 1000,
    expected: int | None = None,
    write: int | None = None,
    bust: Any = None,
    session: str = "s",
) -> dict[str, Any]:
    return {
        "session": session, "round": 0, "prompt_tokens": prompt, "prompt_tokens_local": prompt,
        "cache_read_tokens": read, "expected_cached_tokens": read if expected is None else expected,
        "cache_write_tokens": write, "bust": bust,
    }  # fmt: skip


def rules_fired(records: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(a["call"], a["rule"]) for a in evaluate(records, RULES)]


def test_a_collapsing_hit_rate_fires_once_when_the_window_falls_under() -> None:
    records = [rec(0), *[rec(900)] * 3, *[rec(100)] * 5]
    # call 5's window (900, 900, 100) still reads 63%; call 6's (900, 100, 100) 37%
    assert rules_fired(records) == [(6, "low_hit_rate")]


def test_the_first_call_of_a_session_is_never_in_a_window() -> None:
    assert rules_fired([rec(0), rec(900), rec(900), rec(900)]) == []


def test_it_fires_again_only_after_it_recovered() -> None:
    low, high = rec(100), rec(900)
    records = [rec(0), low, low, low, low, high, high, high, low, low]
    assert rules_fired(records) == [(4, "low_hit_rate"), (10, "low_hit_rate")]


def test_unreported_calls_say_nothing_rather_than_zero() -> None:
    assert rules_fired([rec(None)] * 8) == []


def test_the_hit_rate_is_token_weighted() -> None:
    # 2 of 3 calls under half, but the big call read nearly all: 9100 / 10200 > 0.5
    records = [rec(0), rec(100, prompt=100), rec(0, prompt=100), rec(9000, prompt=10000)]
    assert rules_fired(records) == []


def test_reported_and_expected_drifting_apart() -> None:
    records = [rec(0), *[rec(800, expected=900)] * 3, *[rec(700, expected=950)] * 3]
    assert rules_fired(records) == [(5, "drift")]  # 0.767 read against 0.917 expected


def test_drift_compares_fractions_of_each_sides_own_count() -> None:
    # the provider's tokenizer counts 20% more: same fraction, no drift
    record = rec(960, prompt=1200, expected=800) | {"prompt_tokens_local": 1000}
    assert rules_fired([rec(0), record, record, record]) == []


def test_a_cache_write_every_call() -> None:
    records = [rec(0, write=1000), *[rec(0, expected=0, write=900)] * 3]
    fired = rules_fired(records)
    assert (4, "write_every_call") in fired
    assert rules_fired([rec(0), *[rec(800, write=100)] * 4]) == []


def test_busts_by_tools_or_system_alert_once_per_cause_and_others_do_not() -> None:
    tools = {"cause": "tools", "strategy": None, "message_index": None}
    system = {"cause": "system", "strategy": None, "message_index": 0}
    epoch = {"cause": "strategy", "strategy": "shorten_tools_epoch", "message_index": 9}
    records = [rec(0), rec(900), rec(900, bust=tools), rec(900, bust=epoch)]
    records += [rec(900, bust=system), rec(900, bust=tools)]
    assert rules_fired(records) == [(3, "bust_tools"), (5, "bust_system")]
    alert = evaluate(records, RULES)[0]
    assert alert["message"].startswith("Session 's', call 3: broke the cached prefix at the tools")
    assert alert["message"].endswith("It broke 2 warm calls of this session.")
    assert alert["value"] == 2


def test_a_timestamp_in_the_system_prompt_is_one_alert_with_its_count() -> None:
    """Every call after the first busts at the system prompt: one bust_system alert (and the
    every-call rule once), not one per call; ``ctxmw stats`` gives the count."""
    system = {"cause": "system", "strategy": None, "message_index": 0}
    records = [rec(0, bust=system), *[rec(0, bust=system)] * 14]
    state = AlertState(RULES)
    live = [a["rule"] for r in records for a in state.observe(r)]
    assert live.count("bust_system") == 1
    fired = [a for a in evaluate(records, RULES) if a["rule"] == "bust_system"]
    assert len(fired) == 1
    assert fired[0]["call"] == 2
    assert fired[0]["message"].endswith("It broke 14 warm calls of this session.")


def test_sessions_are_evaluated_apart() -> None:
    a = [rec(0, session="a"), *[rec(900, session="a")] * 3]
    b = [rec(0, session="b"), *[rec(100, session="b")] * 3]
    mixed = [x for pair in zip(a, b, strict=True) for x in pair]
    assert [(al["session"], al["rule"]) for al in evaluate(mixed, RULES)] == [("b", "low_hit_rate")]


def test_rules_come_from_the_settings() -> None:
    rules = AlertRules.from_settings(
        Settings(alert_window=4, alert_min_hit_rate=0.9, alert_bust_causes=["transcript"])
    )
    assert (rules.window, rules.min_hit_rate, rules.bust_causes) == (4, 0.9, ("transcript",))
    state = AlertState(rules)
    bust = {"cause": "transcript", "strategy": None, "message_index": 1}
    assert state.observe(rec(0)) == []
    assert [a["rule"] for a in state.observe(rec(900, bust=bust))] == ["bust_transcript"]


@pytest.mark.anyio
async def test_the_recorder_delivers_alerts_to_the_record_hooks_and_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[Any] = []
    recorder = CallRecorder(
        "s",
        settings=Settings(alert_window=2),
        on_call=[seen.append],
        token_counter=ApproxCounter(),
    )
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "sys " * 1500}]
    with caplog.at_level(logging.INFO, logger="ctxmw"):
        for n in range(4):
            msgs = [*msgs, {"role": "user", "content": f"q{n}"}]
            usage = {"prompt_tokens": 700, "completion_tokens": 1}
            usage["prompt_tokens_details"] = {"cached_tokens": 0}  # type: ignore[assignment]
            await recorder.record(
                model="gpt-4o", wire_kwargs={"model": "gpt-4o", "messages": msgs},
                transcript=msgs, response={"usage": usage}, round=n,
            )  # fmt: skip
    fired = [(i, a["rule"]) for i, r in enumerate(seen) for a in r.alerts]
    assert fired == [(2, "low_hit_rate"), (2, "drift")]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [w.getMessage().split()[2] for w in warnings] == ["low_hit_rate", "drift"]
    assert all("Session 's', call 3: " in w.getMessage() for w in warnings)


@pytest.mark.anyio
async def test_alerts_off_by_the_setting() -> None:
    recorder = CallRecorder("s", settings=Settings(alerts=False), token_counter=ApproxCounter())
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    msgs = [{"role": "user", "content": "hi"}]
    for n in range(2):
        tools = [{**tools[0], "function": {"name": f"f{n}", "parameters": {}}}]
        record = await recorder.record(
            model="gpt-4o", wire_kwargs={"model": "gpt-4o", "messages": msgs, "tools": tools},
            transcript=msgs, response=None,
        )  # fmt: skip
    assert record.bust is not None
    assert record.alerts == ()


def test_a_windowed_alert_says_its_session_window_figure_and_threshold() -> None:
    alerts = evaluate([rec(0), *[rec(100)] * 3], RULES)
    assert [a["message"] for a in alerts] == [
        "Session 's', call 4: the cache hit rate over its last 3 warm calls (leaving out those a "
        "strategy chose to bust) is 10.0%, under the alert_min_hit_rate of 50.0%: look at the "
        "busts of these calls (ctxmw stats)."
    ]
    assert (alerts[0]["value"], alerts[0]["threshold"], alerts[0]["call"]) == (0.1, 0.5, 4)


def openai(read: int, prompt: int, **extra: Any) -> dict[str, Any]:
    """A call under the openai rule (nothing cached under 1,024 prompt tokens)."""
    return rec(read, prompt=prompt, **extra) | {"cache_rule": "openai", "model": "gpt-4o"}


def test_no_alert_while_the_prompt_is_under_the_rules_minimum() -> None:
    """The demo's first calls: the prompt grows from 200 tokens, nothing can be read before the
    previous call reached 1,024; the windows start after it (10 calls here, not a constant)."""
    filling = [openai(0, 200 + 90 * n) for n in range(10)]  # the last one is 1,010 tokens
    warm = [openai(1024 + 128 * n, 1100 + 128 * n) for n in range(8)]
    assert rules_fired([*filling, *warm]) == []
    # the same calls with the window counted from the first call fire at once
    assert AlertRules().min_hit_rate == RULES.min_hit_rate
    assert rules_fired([rec(0, prompt=300) for _ in range(10)] + warm[:2]) != []


def test_the_warm_up_is_the_models_minimum_under_breakpoints() -> None:
    def claude(read: int, prompt: int) -> dict[str, Any]:
        return rec(read, prompt=prompt) | {"cache_rule": "breakpoints", "model": "claude-3-5-haiku"}

    # Haiku caches nothing under 2,048 tokens (litellm's map or the documented fallback)
    assert rules_fired([claude(0, 1500 + 50 * n) for n in range(8)]) == []
    assert rules_fired([claude(0, 2100 + 50 * n) for n in range(5)]) == [(4, "low_hit_rate")]


def test_a_provider_without_a_caching_rule_never_has_a_low_hit_rate_only_drift() -> None:
    none = [rec(0, expected=0) | {"cache_rule": "none"} for _ in range(8)]
    assert rules_fired(none) == []
    caching = [rec(900, expected=0) | {"cache_rule": "none"} for _ in range(8)]
    assert rules_fired(caching) == []  # never warm under none: drift is for known rules


def test_busts_while_the_cache_fills_cost_nothing_and_do_not_alert() -> None:
    tools = {"cause": "tools", "strategy": None, "message_index": None}
    records = [openai(0, 300, bust=tools), openai(0, 600, bust=tools), openai(0, 2000, bust=tools)]
    assert rules_fired(records) == []
    assert rules_fired([*records, openai(0, 2100, bust=tools)]) == [(4, "bust_tools")]


EPOCH = {"cause": "strategy", "strategy": "shorten_tools", "message_index": 1}


def test_calls_a_strategy_chose_to_bust_are_left_out_of_the_hit_rate() -> None:
    # shorten_tools rewrites the head for a while (0 read), then the cache reads again
    records = [rec(0), *[rec(900)] * 3, *[rec(0, bust=EPOCH)] * 6, *[rec(900)] * 3]
    assert rules_fired(records) == []
    transcript = {"cause": "transcript", "strategy": None, "message_index": 1}
    records = [rec(0), *[rec(900)] * 3, *[rec(0, bust=transcript)] * 3]
    assert rules_fired(records) == [(6, "low_hit_rate")]  # the caller's own edits still count


def test_a_strategy_that_busts_every_call_fires_once() -> None:
    records = [rec(0), *[rec(50, bust=EPOCH)] * 8]
    alerts = evaluate(records, RULES)
    assert [(a["call"], a["rule"]) for a in alerts] == [(4, "bust_every_call")]
    assert (alerts[0]["value"], alerts[0]["threshold"]) == (3, 3)
    assert "each of its 3 warm calls so far broke" in alerts[0]["message"]
    assert "strategy:shorten_tools" in alerts[0]["message"]


def test_one_warm_call_that_kept_its_prefix_is_not_every_call() -> None:
    records = [rec(0), rec(900), *[rec(50, bust=EPOCH)] * 8]
    assert rules_fired(records) == []


def test_a_small_summary_call_does_not_cool_the_agents_cache() -> None:
    summary = openai(0, 300) | {"kind": "summary"}
    tools = {"cause": "tools", "strategy": None, "message_index": None}
    records = [openai(0, 2000), openai(1920, 2100), summary, openai(0, 2200, bust=tools)]
    assert (4, "bust_tools") in rules_fired(records)  # call 4 is warm: the summary cools nothing
