"""Invariants of every built-in strategy and their compositions, over generated transcripts.

(a) output validates whenever input validates; (b) the input list and its dicts are unchanged;
(c) for the epoch strategies and the economic schedule, within one epoch the prompt at a call
point is, message by message, an exact prefix of the prompt at any later call point of the same
epoch.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from ctxmw import Settings, list_strategies, prepare_prompt, validate
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.types import Messages, StrategyContext
from tests.transcripts import SMALL_WINDOWS, call_points, transcripts

pytestmark = pytest.mark.slow  # property tests with many examples: the slow tier

# Small windows so that generated transcripts of a few dozen calls cross many boundaries.
SMALL = SMALL_WINDOWS
# The folding strategies (compact, summarize) must not trigger here: they have their own
# properties with tiny windows, and summarize would call a model.
QUIET = {"context_window": 10**9}
CONFIGS = [{**SMALL, **QUIET}, QUIET]
BUILTINS = [info.name for info in list_strategies()]
EPOCH = ["shorten_tools_epoch", "shorten_tools_epoch_increment", "shorten_tools_economic"]
PROFILE = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Compositions are drawn, not enumerated: the registry grows, the run time must not.
CHAINS = st.lists(st.sampled_from(BUILTINS), min_size=2, max_size=4)


def prepare(messages: Messages, chain: list[str], overrides: dict[str, Any]) -> Messages:
    return anyio.run(lambda: prepare_prompt(messages, chain, settings=overrides))


def check_invariants(messages: Messages, chain: list[str], overrides: dict[str, Any]) -> None:
    validate(messages)
    before = copy.deepcopy(messages)
    items = list(messages)
    prompt = prepare(messages, chain, overrides)
    validate(prompt)
    assert messages == before
    assert all(a is b for a, b in zip(messages, items, strict=True))
    assert prepare(messages, chain, overrides) == prompt


@pytest.mark.parametrize("overrides", CONFIGS, ids=["small", "default"])
@pytest.mark.parametrize("name", BUILTINS)
@PROFILE
@given(messages=transcripts())
def test_each_strategy_valid_in_valid_out_and_input_untouched(
    name: str, overrides: dict[str, Any], messages: Messages
) -> None:
    check_invariants(messages, [name], overrides)


@pytest.mark.parametrize("overrides", CONFIGS, ids=["small", "default"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chain=CHAINS, messages=transcripts())
def test_compositions_valid_in_valid_out_and_input_untouched(
    chain: list[str], overrides: dict[str, Any], messages: Messages
) -> None:
    check_invariants(messages, chain, overrides)


def _epoch_key(ctx: StrategyContext, name: str) -> tuple[int, ...] | None:
    stats = ctx.stats.get(name)
    if stats is None:
        return None
    return (stats["pinned"], stats["size"], stats["truncate_to"] - stats["keep_full"])


@pytest.mark.parametrize("name", EPOCH)
@PROFILE
@given(messages=transcripts(max_turns=60))
def test_prompt_is_byte_stable_within_an_epoch(name: str, messages: Messages) -> None:
    s = Settings(**SMALL)
    strategies = resolve_strategies(name, s)
    seen: list[tuple[tuple[int, ...] | None, list[str]]] = []
    for point in call_points(messages):
        ctx = StrategyContext(settings=s)
        prompt = anyio.run(apply_strategies, messages[:point], strategies, ctx)
        seen.append((_epoch_key(ctx, name), [json.dumps(m, sort_keys=True) for m in prompt]))
    for (key_a, a), (key_b, b) in itertools.pairwise(seen):
        if key_a == key_b:
            assert b[: len(a)] == a


def _epochs_crossed(messages: Messages) -> int:
    s = Settings(**SMALL)
    keys = set()
    for point in call_points(messages):
        ctx = StrategyContext(settings=s)
        anyio.run(apply_strategies, messages[:point], resolve_strategies(EPOCH[1], s), ctx)
        keys.add(_epoch_key(ctx, EPOCH[1]))
    return len(keys)


def test_no_hypothesis_test_has_a_deadline() -> None:
    """A loaded machine must not fail a correct run: the suite's profile has no deadline."""
    assert settings.default.deadline is None
    assert settings().deadline is None


def test_generated_transcripts_do_cross_epochs() -> None:
    """Guard against a vacuous stability test: the generator makes sessions crossing epochs."""
    found = find(
        transcripts(max_turns=60),
        lambda m: _epochs_crossed(m) >= 4,
        settings=settings(deadline=None, suppress_health_check=[HealthCheck.too_slow]),
    )
    assert _epochs_crossed(found) >= 4
