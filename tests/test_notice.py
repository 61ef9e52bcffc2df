"""The compaction notice tells the truth: what was shortened and removed, why (cost or the
window), and whether it can be read back (ctxmw_expand: the handles of compacted results, or
offload's previews when offload runs first)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ctxmw import Settings
from ctxmw.errors import SettingsError
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.strategies._notice import REASONS, RECOVER
from ctxmw.strategies.shorten_tools_economic import NAME, shorten_tools_economic
from ctxmw.strategies.shorten_tools_epoch import shorten_tools_epoch
from ctxmw.types import Messages, StrategyContext
from tests.transcripts import adjacent_calls

SONNET = "anthropic/claude-sonnet-4-5"
TIERS = {
    "economic_full_tool_calls": 5,
    "economic_compacted_tool_calls": 40,
    "economic_compacted_result_chars": 400,
}


def notice_of(prompt: Messages) -> str:
    found = [m["content"] for m in prompt if "[Context note from ctxmw]" in str(m.get("content"))]
    assert len(found) == 1, found
    return str(found[0])


def economic(messages: Messages, chain: tuple[str, ...] = (), **overrides: Any) -> Messages:
    ctx = StrategyContext(settings=Settings(**TIERS, **overrides), model=SONNET, chain=chain)
    return shorten_tools_economic(messages, ctx)


def test_a_cost_move_says_cost_not_the_window() -> None:
    text = notice_of(economic(adjacent_calls(120)))
    assert text.startswith(f"[Context note from ctxmw] {REASONS['cost']},")
    assert "context window" not in text


def test_a_move_the_window_forced_says_the_window() -> None:
    text = notice_of(economic(adjacent_calls(200), context_window=30_000))
    assert REASONS["window"] in text
    assert REASONS["cost"] not in text


def test_the_counts_match_what_the_prompt_changed() -> None:
    source = adjacent_calls(120)
    prompt = economic(source)
    text = notice_of(prompt)
    dropped = len(source) - (len(prompt) - 1)
    compacted = sum(1 for m in prompt if "[compacted:" in str(m) and m.get("content") != text)
    assert f"{compacted} messages are compacted" in text
    assert f"{dropped} messages were removed" in text


def test_by_default_the_notice_promises_read_back_by_handle() -> None:
    prompt = economic(adjacent_calls(120), chain=("shorten_tools_economic",))
    assert RECOVER["readback"] in notice_of(prompt)
    compacted = [m for m in prompt if m.get("role") == "tool" and "[compacted:" in m["content"]]
    assert compacted
    assert all("ctxmw_expand handle " in m["content"] for m in compacted)


def test_without_readback_or_offload_nothing_is_promised_back() -> None:
    prompt = economic(adjacent_calls(120), chain=("shorten_tools_economic",), readback=False)
    text = notice_of(prompt)
    assert RECOVER["none"] in text
    assert "ctxmw_expand" not in "".join(str(m.get("content")) for m in prompt)


def test_with_offload_first_the_notice_names_ctxmw_expand() -> None:
    chain = ("offload", "shorten_tools_economic")
    text = notice_of(economic(adjacent_calls(120), chain=chain, readback=False))
    assert RECOVER["offload"] in text
    assert "ctxmw_expand" in text


def test_offload_after_the_strategy_promises_nothing() -> None:
    chain = ("shorten_tools_economic", "offload")
    prompt = economic(adjacent_calls(120), chain=chain, readback=False)
    assert "ctxmw_expand" not in notice_of(prompt)


def test_the_epoch_strategies_say_why_too() -> None:
    ctx = StrategyContext(settings=Settings(), model=SONNET, chain=("shorten_tools_epoch",))
    text = notice_of(shorten_tools_epoch(adjacent_calls(120), ctx))
    assert REASONS["cost"] in text
    assert RECOVER["none"] in text


def test_a_custom_notice_may_use_every_field() -> None:
    custom = "{reason}: {compacted} short, {dropped} gone. {recover}"
    ctx = StrategyContext(settings=Settings(compaction_notice=custom, **TIERS), model=SONNET)
    prompt = shorten_tools_economic(adjacent_calls(120), ctx)
    assert any(str(m.get("content", "")).startswith(REASONS["cost"]) for m in prompt)


def test_an_unknown_field_names_the_allowed_ones() -> None:
    with pytest.raises(SettingsError, match=r"\{reason\}, \{recover\}"):
        Settings(compaction_notice="{why} gone")


def test_what_the_notice_promises_back_keeps_its_handle() -> None:
    # Offload first, then the default's compacted lines: every compacted result still shows the
    # offload handle the notice tells the model to expand.
    source = adjacent_calls(120)
    for m in source:
        if m.get("role") == "tool":
            m["content"] = "\n".join(f"line {i} of {m['tool_call_id']}" for i in range(300))
    s = Settings(offload_threshold=100, readback=False, **TIERS)
    chain = resolve_strategies("offload,shorten_tools_economic", s)
    ctx = StrategyContext(settings=s, model=SONNET, memo={}, chain=("offload", NAME))
    prompt = anyio.run(apply_strategies, source, chain, ctx)
    compacted = [m for m in prompt if m.get("role") == "tool" and "[compacted:" in m["content"]]
    assert compacted
    assert all("[ctxmw offload " in m["content"] for m in compacted)
    assert "ctxmw_expand" in notice_of(prompt)
