"""Caching rules, their auto resolution, the minimums, and the cache_rule setting."""

from __future__ import annotations

import pytest

from ctxmw.errors import SettingsError
from ctxmw.settings import Settings
from ctxmw.telemetry.rules import (
    cache_minimum,
    expected_cached_tokens,
    resolve_rule,
    self_hosted,
)


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [(0, 0), (1023, 0), (1024, 1024), (1151, 1024), (1152, 1152), (5000, 4992)],
)
def test_openai_rule_minimum_and_128_token_blocks(prefix: int, expected: int) -> None:
    got = expected_cached_tokens(
        "openai", prefix_tokens=prefix, marked_prefix_tokens=0, minimum=1024
    )
    assert got == expected


def test_breakpoints_rule_reads_only_up_to_the_mark_and_above_the_minimum() -> None:
    rule = "breakpoints"
    assert (
        expected_cached_tokens(rule, prefix_tokens=9000, marked_prefix_tokens=3000, minimum=1024)
        == 3000
    )
    assert (
        expected_cached_tokens(rule, prefix_tokens=9000, marked_prefix_tokens=1000, minimum=1024)
        == 0
    )
    assert expected_cached_tokens(rule, prefix_tokens=9000, marked_prefix_tokens=0, minimum=0) == 0


def test_gemini_exact_and_none_rules() -> None:
    def run(rule: str, prefix: int, minimum: int) -> int:
        return expected_cached_tokens(
            rule, prefix_tokens=prefix, marked_prefix_tokens=0, minimum=minimum
        )

    assert (run("gemini", 1000, 1024), run("gemini", 1500, 1024)) == (0, 1500)
    assert (run("exact", 77, 0), run("none", 5000, 0)) == (77, 0)


@pytest.mark.parametrize(
    ("model", "provider", "api_base", "rule"),
    [
        ("gpt-4o", "openai", None, "openai"),
        ("gpt-4o", "openai", "https://api.openai.com/v1", "openai"),
        ("openai/qwen", "openai", "http://127.0.0.1:8080/v1", "exact"),
        ("anthropic/claude-sonnet-4-5", "anthropic", None, "breakpoints"),
        (
            "bedrock/converse/anthropic.claude-3-5-sonnet-20240620-v1:0",
            "bedrock",
            None,
            "breakpoints",
        ),
        ("gemini/gemini-2.5-flash", "gemini", None, "gemini"),
        ("vertex_ai/gemini-2.5-pro", "vertex_ai", None, "gemini"),
        ("hosted_vllm/qwen", "hosted_vllm", "http://gpu:8000/v1", "exact"),
        ("ollama/llama3", "ollama", None, "exact"),
        ("deepseek/deepseek-chat", "deepseek", None, "exact"),
        ("cohere/command-r", "cohere", None, "none"),
    ],
)
def test_auto_resolution(model: str, provider: str, api_base: str | None, rule: str) -> None:
    assert resolve_rule("auto", model, provider, api_base) == rule


def test_an_explicit_rule_wins() -> None:
    assert resolve_rule("exact", "gpt-4o", "openai") == "exact"


def test_minimums_from_litellm_then_the_documented_fallback() -> None:
    assert cache_minimum("openai", "gpt-4o") == 1024
    assert cache_minimum("breakpoints", "claude-haiku-4-5", "anthropic") == 4096  # litellm's map
    assert cache_minimum("breakpoints", "claude-sonnet-4-5", "anthropic") == 1024  # litellm's map
    assert cache_minimum("breakpoints", "claude-3-haiku-20990101", "anthropic") == 2048  # fallback
    assert cache_minimum("breakpoints", "claude-new-20990101", "anthropic") == 1024  # fallback
    assert cache_minimum("gemini", "gemini/gemini-2.5-pro", "gemini") == 2048  # litellm's map
    assert cache_minimum("gemini", "gemini/gemini-2.5-flash", "gemini") == 1024  # fallback
    assert cache_minimum("gemini", "gemini/gemini-9-pro", "gemini") == 4096  # fallback
    assert cache_minimum("exact", "x") == 0


def test_cache_rule_setting_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().cache_rule == "auto"
    assert Settings(cache_rule="exact").cache_rule == "exact"
    with pytest.raises(SettingsError, match=r"cache_rule.*allowed: auto, openai"):
        Settings(cache_rule="sometimes")
    monkeypatch.setenv("CTXMW_CACHE_RULE", "nope")
    with pytest.raises(SettingsError, match="CTXMW_CACHE_RULE"):
        Settings()


def test_exact_adds_the_partial_message_others_ignore_it() -> None:
    def run(rule: str) -> int:
        return expected_cached_tokens(
            rule, prefix_tokens=2000, marked_prefix_tokens=0, minimum=0, partial_tokens=40
        )

    assert (run("exact"), run("openai"), run("gemini"), run("none")) == (2040, 1920, 2000, 0)


@pytest.mark.parametrize(
    ("provider", "api_base", "hosted"),
    [
        ("openai", None, False),
        ("openai", "https://api.openai.com/v1", False),
        ("azure", "https://me.openai.azure.com", False),
        ("openai", "http://127.0.0.1:8011/v1", True),
        ("hosted_vllm", None, True),
        ("ollama", None, True),
        ("anthropic", None, False),
        ("deepseek", None, False),
    ],
)
def test_self_hosted_endpoints(provider: str, api_base: str | None, hosted: bool) -> None:
    assert self_hosted(provider, api_base) is hosted
