"""The acceptance session: 200 calls under shorten_tools_epoch_increment, through CallRecorder."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import litellm
import pytest

from ctxmw.settings import Settings
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.telemetry import ApproxCounter, CallRecord, CallRecorder, canonical_bytes
from ctxmw.telemetry.counters import TokenCounter
from ctxmw.types import Messages, StrategyContext
from tests._synthetic import TOOLS, session

STRATEGY = "shorten_tools_epoch_increment"


Call = tuple[CallRecord, Messages, int | None]
_RUNS: dict[tuple[int, str], list[Call]] = {}


async def _run(rounds: int, counter: TokenCounter, model: str) -> list[Call]:
    """Every call: its record, the payload sent, and the epoch strategy's ``pinned``."""
    key = (rounds, type(counter).__name__)
    if key not in _RUNS:  # both acceptance tests read the same deterministic session
        _RUNS[key] = await _session_calls(rounds, counter, model)
    return _RUNS[key]


async def _session_calls(rounds: int, counter: TokenCounter, model: str) -> list[Call]:
    settings = Settings()
    transcript, points = session(rounds)
    recorder = CallRecorder("s1", settings=settings, token_counter=counter)
    strategies = resolve_strategies(STRATEGY, settings)
    out = []
    for n, cut in enumerate(points):
        ctx = StrategyContext(settings=settings, model=model, round=n)
        trace: list[tuple[str, Messages]] = []
        prompt = await apply_strategies(transcript[:cut], strategies, ctx, trace=trace)
        kwargs = {"model": model, "messages": prompt, "tools": TOOLS}
        record = await recorder.record(
            model=model,
            wire_kwargs=kwargs,
            transcript=transcript[:cut],
            trace=trace,
            stats=ctx.stats,
            response=None,
            latency_s=0.0,
            round=n,
        )
        out.append((record, prompt, ctx.stats.get(STRATEGY, {}).get("pinned")))
    return out


def _common_messages(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> int:
    k = 0
    while k < min(len(a), len(b)) and canonical_bytes(a[k]) == canonical_bytes(b[k]):
        k += 1
    return k


def _scratch_prefix(prev: Messages, cur: Messages) -> int:
    fresh = ApproxCounter()
    k = _common_messages(prev, cur)
    tools = fresh.tools_tokens("m", TOOLS, True)
    return tools + sum(fresh.message_tokens("m", m) for m in cur[:k])


@pytest.mark.anyio
async def test_prefix_equals_recomputed_common_prefix_on_every_call() -> None:
    calls = await _run(200, ApproxCounter(), "gpt-4o")
    assert calls[0][0].prefix_tokens_local == 0
    for (_, prev, _), (record, cur, _) in pairwise(calls):
        assert record.prefix_tokens_local == _scratch_prefix(prev, cur)


@pytest.mark.anyio
async def test_busts_name_the_epoch_strategy_exactly_at_epoch_boundaries() -> None:
    calls = await _run(200, ApproxCounter(), "gpt-4o")
    boundaries = [i for i in range(1, len(calls)) if calls[i][2] != calls[i - 1][2]]
    busts = [i for i, (record, _, _) in enumerate(calls) if record.bust is not None]
    assert len(boundaries) >= 5  # the session really crosses several epochs
    assert busts == boundaries
    for i in busts:
        bust = calls[i][0].bust
        assert bust is not None
        assert (bust["cause"], bust["strategy"]) == ("strategy", STRATEGY)
        assert bust["message_index"] == _common_messages(calls[i - 1][1], calls[i][1])


@pytest.mark.anyio
async def test_real_token_counter_prefix_matches_litellm_from_scratch() -> None:
    from ctxmw.telemetry import LiteLLMCounter

    model = "gpt-4o"
    calls = await _run(90, LiteLLMCounter(), model)
    primer = litellm.token_counter(model=model, messages=[])
    for (_, prev, _), (record, cur, _) in pairwise(calls):
        k = _common_messages(prev, cur)
        expected = litellm.token_counter(model=model, messages=cur[:k], tools=TOOLS) - primer
        assert record.prefix_tokens_local == expected
        whole = litellm.token_counter(model=model, messages=cur, tools=TOOLS)
        assert record.prompt_tokens_local == whole
