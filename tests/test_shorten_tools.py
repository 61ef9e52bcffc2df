"""shorten_tools: tiers by count and by characters, recomputed every call, never a notice."""

from __future__ import annotations

from collections.abc import Callable

from ctxmw import validate
from ctxmw.strategies.shorten_tools import shorten_tools
from ctxmw.types import Messages
from tests.transcripts import adjacent_calls, classify, span

Run = Callable[..., Messages]


def _args_compacted(source: Messages, prompt: Messages) -> list[int]:
    """Forward numbers whose call arguments the prompt shows compacted."""
    shown = {m["tool_calls"][0]["id"]: m for m in prompt if m.get("tool_calls")}
    ids = [m["tool_calls"][0]["id"] for m in source if m.get("tool_calls")]
    return [f for f, cid in enumerate(ids, 1) if cid in shown and "[compacted:" in str(shown[cid])]


def test_count_tiers_without_character_budget(run: Run) -> None:
    source = adjacent_calls(50)
    prompt = run(shorten_tools, source, max_tool_chars=0)
    assert classify(source, prompt) == {
        "dropped": span(1, 10),
        "compacted": span(11, 40),
        "full": span(41, 50),
    }
    # full_tool_calls = 0: every kept call's long arguments are compacted.
    assert _args_compacted(source, prompt) == span(11, 50)


def test_character_budget_keeps_more_full(run: Run) -> None:
    source = adjacent_calls(50)
    # Newest first, each call spends its result's and its arguments' characters.
    per_call = len(source[3]["content"]) + len(source[2]["tool_calls"][0]["function"]["arguments"])
    prompt = run(shorten_tools, source, max_tool_chars=per_call * 15, full_tool_outputs=0)
    assert classify(source, prompt)["full"] == span(36, 50)


def test_everything_fits_the_default_budget(run: Run) -> None:
    source = adjacent_calls(30)
    assert run(shorten_tools, source) == source


def test_results_beyond_their_maximum_are_compacted_while_calls_remain(run: Run) -> None:
    source = adjacent_calls(50)
    prompt = run(shorten_tools, source, max_tool_chars=0, max_tool_outputs=20)
    validate(prompt)
    regions = classify(source, prompt)
    assert regions["dropped"] == span(1, 10)
    assert regions["compacted"] == span(11, 40)


def test_protect_current_turn_keeps_the_whole_turn_full(run: Run) -> None:
    source = adjacent_calls(50)
    prompt = run(shorten_tools, source, max_tool_chars=0, shorten_tools_protect_current_turn=True)
    assert prompt == source


def test_never_adds_a_notice(run: Run) -> None:
    source = adjacent_calls(80)
    prompt = run(shorten_tools, source, max_tool_chars=0)
    users = [m for m in prompt if m["role"] == "user"]
    assert users == [m for m in source if m["role"] == "user"]
