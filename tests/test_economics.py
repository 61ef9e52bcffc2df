"""The prices and limits the economic schedule decides with (ctxmw/strategies/_economics.py)."""

from __future__ import annotations

import litellm
import pytest

from ctxmw import Settings
from ctxmw._litellm import mapped_model_info
from ctxmw.strategies._economics import UNPRICED_READ_SHARE, WRITE_PREMIUM, economics
from ctxmw.telemetry.cost import entry_rates

_ENTRY = {"litellm_provider": "openai", "mode": "chat", "output_cost_per_token": 1e-5}


def test_an_unpriced_model_gets_ratios_of_one_and_the_usual_read_discount() -> None:
    econ = economics("openai/no-such-model-xyz", Settings(cache_rule="openai"))
    assert econ.input == 1.0
    assert econ.read == UNPRICED_READ_SHARE
    assert econ.write == 1.0  # no write premium under automatic caching


def test_breakpoints_charge_a_write_premium_and_rewrite_the_head() -> None:
    econ = economics("openai/no-such-model-xyz", Settings(cache_rule="breakpoints"))
    assert econ.write == WRITE_PREMIUM
    assert not econ.head_read
    assert economics("openai/no-such-model-xyz", Settings(cache_rule="openai")).head_read


def test_under_none_every_token_costs_the_input_price_and_nothing_is_cached() -> None:
    econ = economics("openai/no-such-model-xyz", Settings(cache_rule="none"))
    assert econ.read == econ.write == econ.input
    assert not econ.caches(10**9)


def test_litellm_prices_are_used_where_it_has_them() -> None:
    econ = economics("anthropic/claude-sonnet-4-5", Settings(cache_rule="breakpoints"))
    assert 0 < econ.read < econ.input < econ.write


def test_a_prompt_under_the_minimum_is_not_cached() -> None:
    econ = economics("openai/gpt-4o", Settings(cache_rule="openai"))
    assert econ.minimum > 0
    assert not econ.caches(econ.minimum - 1)
    assert econ.caches(econ.minimum)


def test_the_limit_is_the_window_minus_the_output_reservation() -> None:
    econ = economics("openai/gpt-4o", Settings(context_window=50_000, output_reservation=2_000))
    assert econ.limit == 48_000


def test_the_ttl_setting_overrides_the_providers() -> None:
    assert economics("openai/gpt-4o", Settings(cache_ttl=42.0)).ttl == 42.0
    assert economics("deepseek/deepseek-chat", Settings()).ttl == 3600.0


def test_no_model_means_the_exact_rule_unless_a_rule_is_set() -> None:
    assert economics(None, Settings()).rule == "exact"
    assert economics(None, Settings(cache_rule="none")).rule == "none"


def test_a_model_registered_later_is_priced(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "openai/ctxmw-test-economics-registered"
    monkeypatch.setattr(litellm, "model_cost", dict(litellm.model_cost))
    assert economics(name, Settings(cache_rule="openai")).input == 1.0
    litellm.register_model({name: {**_ENTRY, "input_cost_per_token": 2e-6}})
    assert economics(name, Settings(cache_rule="openai")).input == 2e-6


def test_a_price_overridden_later_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "openai/ctxmw-test-economics-overridden"
    monkeypatch.setattr(litellm, "model_cost", dict(litellm.model_cost))
    litellm.register_model({name: {**_ENTRY, "input_cost_per_token": 1e-6}})
    assert economics(name, Settings(cache_rule="openai")).input == 1e-6
    litellm.register_model({name: {**_ENTRY, "input_cost_per_token": 3e-6}})
    assert economics(name, Settings(cache_rule="openai")).input == 3e-6


def test_the_schedule_reads_the_prices_the_telemetry_bills(monkeypatch: pytest.MonkeyPatch) -> None:
    """One reading of litellm's price keys: the schedule weighs the rates the cost uses."""
    name = "openai/ctxmw-test-economics-one-reading"
    monkeypatch.setattr(litellm, "model_cost", dict(litellm.model_cost))
    entry = {
        **_ENTRY,
        "input_cost_per_token": 3e-6,
        "cache_read_input_token_cost": 3e-7,
        "cache_creation_input_token_cost": 3.75e-6,
    }
    litellm.register_model({name: entry})
    rates = entry_rates(mapped_model_info(name))
    assert rates is not None
    econ = economics(name, Settings(cache_rule="breakpoints"))
    assert (
        (econ.input, econ.read, econ.write)
        == (
            rates.input,
            rates.cache_read,
            rates.cache_write,
        )
        == (3e-6, 3e-7, 3.75e-6)
    )


def test_a_zero_read_price_counts_as_unpriced(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "openai/ctxmw-test-economics-zero-read"
    monkeypatch.setattr(litellm, "model_cost", dict(litellm.model_cost))
    entry = {**_ENTRY, "input_cost_per_token": 2e-6, "cache_read_input_token_cost": 0.0}
    litellm.register_model({name: entry})
    assert economics(name, Settings(cache_rule="openai")).read == 2e-6 * UNPRICED_READ_SHARE
