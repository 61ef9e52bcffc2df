"""A memo kept across calls never changes a prompt: it only saves work.

Over generated transcripts and generated caller behaviours (append rounds, drop the tail, edit
or remove a middle message, remove a tool pair, rebuild equal dicts, change settings or model,
switch to another conversation on the same memo), the prompt that every registered strategy and
the default list produce with one memo kept across the calls equals, byte for byte, the prompt
with a fresh memo; so do the stats the telemetry reads.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxmw import Settings, list_strategies
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.types import Messages, StrategyContext
from tests.transcripts import SMALL_WINDOWS, transcripts

SMALL = {
    **SMALL_WINDOWS,
    "context_window": 10**9,  # compact and summarize stay quiet (summarize would call a model)
}
OTHER = {
    **SMALL,
    "epoch_full_tool_calls": 1,
    "economic_full_tool_calls": 1,
    "short_output_length": 40,
    "economic_compacted_result_chars": 40,
    "epoch_size": 2,
}
CONFIGS = (Settings(**SMALL), Settings(**OTHER))
MODELS = (None, "anthropic/claude-sonnet-4-5", "openai/gpt-4o-mini")
CHAINS = [info.name for info in list_strategies()] + [
    "default",
    "shorten_tools_economic,cache_breakpoints",
    "repair_tool_pairs,shorten_tools_epoch_increment,cache_breakpoints",
]
PROFILE = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Action = tuple[str, int]
KINDS = ("append", "append", "append", "drop", "edit", "remove", "unpair", "rebuild")
KINDS += ("settings", "model", "switch")
ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.integers(0, 10**6),
    ),
    min_size=2,
    max_size=10,
)


class Caller:
    """A caller's history, changed by one action at a time (never the dicts it already sent)."""

    def __init__(self, source: Messages, other: Messages) -> None:
        self.sources = (source, other)
        self.which = 0
        self.grown = min(len(source), 4)
        self.history: Messages = list(source[: self.grown])
        self.config = 0
        self.model = 0

    def act(self, kind: str, r: int) -> None:
        h = self.history
        if kind == "append":
            source = self.sources[self.which]
            step = 1 + r % 7
            self.history = [*h, *source[self.grown : self.grown + step]]
            self.grown = min(self.grown + step, len(source))
        elif kind == "drop" and h:
            self.history = h[: len(h) - 1 - r % min(len(h), 5)]
        elif kind == "edit" and h:
            i = r % len(h)
            self.history = [*h[:i], {**h[i], "content": f"edited {r}"}, *h[i + 1 :]]
        elif kind == "remove" and h:
            i = r % len(h)
            self.history = [*h[:i], *h[i + 1 :]]
        elif kind == "unpair":
            self.history = _without_pair(h, r)
        elif kind == "rebuild":
            self.history = copy.deepcopy(h)  # a framework's equal dicts, new objects
        elif kind == "settings":
            self.config = 1 - self.config
        elif kind == "model":
            self.model = (self.model + 1 + r % 2) % len(MODELS)
        elif kind == "switch":
            self.which = 1 - self.which
            self.grown = min(len(self.sources[self.which]), 2 + r % 9)
            self.history = list(self.sources[self.which][: self.grown])


def _without_pair(history: Messages, r: int) -> Messages:
    """The history without one tool result and its tool_call (the assistant message rebuilt)."""
    results = [i for i, m in enumerate(history) if m.get("role") == "tool"]
    if not results:
        return history
    i = results[r % len(results)]
    call_id = history[i].get("tool_call_id")
    out: Messages = []
    for k, msg in enumerate(history):
        if k == i:
            continue
        calls = msg.get("tool_calls")
        if k < i and isinstance(calls, list) and any(tc.get("id") == call_id for tc in calls):
            msg = {**msg, "tool_calls": [tc for tc in calls if tc.get("id") != call_id]}
        out.append(msg)
    return out


def _run(messages: Messages, chain: str, caller: Caller, memo: dict[str, Any]) -> str:
    s = CONFIGS[caller.config]
    ctx = StrategyContext(settings=s, model=MODELS[caller.model], memo=memo)
    named = resolve_strategies(None if chain == "default" else chain, s)
    try:
        prompt = anyio.run(apply_strategies, messages, named, ctx)
    except Exception as exc:  # the same failure either way is the same result
        return f"raised {type(exc).__name__}: {exc}"
    return json.dumps([prompt, ctx.stats], sort_keys=True, default=repr)


@pytest.mark.parametrize("chain", CHAINS)
@PROFILE
@given(source=transcripts(max_turns=30), other=transcripts(max_turns=12), actions=ACTIONS)
def test_a_kept_memo_gives_what_a_fresh_memo_gives(
    chain: str, source: Messages, other: Messages, actions: list[Action]
) -> None:
    caller = Caller(source, other)
    kept: dict[str, Any] = {}
    for kind, r in actions:
        caller.act(kind, r)
        sent = caller.history
        before = copy.deepcopy(sent)
        assert _run(sent, chain, caller, kept) == _run(sent, chain, caller, {})
        assert sent == before  # the caller's messages are never mutated


def test_the_behaviours_reach_the_incremental_paths() -> None:
    """Guard against a vacuous property: an append after a drop keeps part of the render memo,
    and the kept render is the one a fresh memo makes."""
    source = anyio.run(_long_source)
    caller = Caller(source, source)
    kept: dict[str, Any] = {}
    for kind, r in [("append", 6), ("append", 6), ("drop", 2), ("append", 6), ("edit", 5)]:
        caller.act(kind, r)
        assert _run(caller.history, "shorten_tools_epoch", caller, kept) == _run(
            caller.history, "shorten_tools_epoch", caller, {}
        )
    assert "render:shorten_tools_epoch" in kept
    assert "tool_index:shorten_tools_epoch" in kept


async def _long_source() -> Messages:
    from tests.transcripts import adjacent_calls

    return adjacent_calls(12)
