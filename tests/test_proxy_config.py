"""The ``ctxmw:`` section of a proxy config file, and the proxy's own Redis settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxmw.errors import SettingsError
from ctxmw.proxy import config_from_mapping, load_config
from ctxmw.proxy.config import proxy_redis_url


def test_a_file_without_a_section_gives_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("model_list: []\n")
    config = load_config(path)
    assert config.state == "memory"
    assert config.options("agent") == {}


def test_state_redis_uses_the_router_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_REDIS_PORT", "6390")
    raw = {
        "router_settings": {"redis_host": "127.0.0.1", "redis_port": "os.environ/MY_REDIS_PORT"},
        "ctxmw": {"state": "redis"},
    }
    assert config_from_mapping(raw).state == "redis://127.0.0.1:6390/0"


def test_state_redis_falls_back_to_cache_params_then_env(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = {"litellm_settings": {"cache_params": {"type": "redis", "host": "h", "password": "p"}}}
    assert proxy_redis_url(cache) == "redis://:p@h:6379/0"
    monkeypatch.setenv("REDIS_HOST", "r")
    monkeypatch.setenv("REDIS_PORT", "7000")
    assert proxy_redis_url({}) == "redis://r:7000/0"


def test_state_redis_without_any_redis_says_where_to_set_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("REDIS_URL", "REDIS_HOST"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SettingsError, match=r"router_settings\.redis_host"):
        config_from_mapping({"ctxmw": {"state": "redis"}})


def test_an_unknown_key_is_named_with_what_is_allowed() -> None:
    with pytest.raises(SettingsError, match=r"\['epoch_size'\].*Move ctxmw settings under"):
        config_from_mapping({"ctxmw": {"epoch_size": 3}})


def test_invalid_settings_fail_when_the_config_loads() -> None:
    with pytest.raises(SettingsError, match="epoch_size"):
        config_from_mapping({"ctxmw": {"settings": {"epoch_size": "many"}}})
    with pytest.raises(SettingsError, match=r"ctxmw options for 'agent'.*epoch_size"):
        config_from_mapping({"ctxmw": {"models": {"agent": {"epoch_size": "many"}}}})


def test_a_section_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(SettingsError, match=r"must be a mapping.*got 'fast'"):
        config_from_mapping({"ctxmw": {"settings": "fast"}})


def test_the_ledger_path_names_the_replica() -> None:
    config = config_from_mapping({"ctxmw": {"ledger": "/logs/{replica}.jsonl", "replica": "r1"}})
    assert str(config.ledger_path()) == "/logs/r1.jsonl"


def test_request_options_are_off_by_default_and_a_list_when_on() -> None:
    assert config_from_mapping({}).request_options == ()
    on = config_from_mapping({"ctxmw": {"request_options": ["epoch_size", "prompt_strategies"]}})
    assert on.request_options == ("epoch_size", "prompt_strategies")
    with pytest.raises(SettingsError, match=r"a list of the setting names.*got True"):
        config_from_mapping({"ctxmw": {"request_options": True}})
    with pytest.raises(SettingsError, match=r"'epoch_sise', which is not a ctxmw setting"):
        config_from_mapping({"ctxmw": {"request_options": ["epoch_sise"]}})


@pytest.mark.parametrize("name", ["summary_model", "durable_patterns"])
def test_no_allow_list_can_let_a_tenant_name_a_model_or_run_a_regex(name: str) -> None:
    with pytest.raises(SettingsError, match=rf"lists '{name}', which no request may set"):
        config_from_mapping({"ctxmw": {"request_options": [name]}})


@pytest.mark.parametrize(
    "section",
    [
        {"settings": {"prompt_strategies": "offload,inbox"}},
        {"models": {"agent": {"prompt_strategies": "offload"}}},
        {"keys": {"bot": {"prompt_strategies": "inbox,offload"}}},
    ],
)
def test_offload_is_refused_in_the_proxy_with_the_reason(section: dict[str, object]) -> None:
    with pytest.raises(SettingsError, match=r"'offload' strategy cannot run in the proxy"):
        config_from_mapping({"ctxmw": section})


def test_the_state_failure_policy_is_closed_by_default_and_checked() -> None:
    config = config_from_mapping({})
    assert (config.on_state_error, config.state_timeout) == ("closed", 2.0)
    opened = config_from_mapping({"ctxmw": {"on_state_error": "open", "state_timeout": 0.5}})
    assert (opened.on_state_error, opened.state_timeout) == ("open", 0.5)
    with pytest.raises(SettingsError, match=r"on_state_error must be one of.*got 'ajar'"):
        config_from_mapping({"ctxmw": {"on_state_error": "ajar"}})
    with pytest.raises(SettingsError, match=r"state_timeout must be .*got 0"):
        config_from_mapping({"ctxmw": {"state_timeout": 0}})


def test_limits_default_safely_and_take_numbers_or_environment_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert config_from_mapping({}).limits.conversation_notes == 100
    monkeypatch.setenv("NOTES_CAP", "20")
    section = {"limits": {"conversation_notes": "os.environ/NOTES_CAP", "memo_bytes": 1 << 20}}
    limits = config_from_mapping({"ctxmw": section}).limits
    assert (limits.conversation_notes, limits.memo_bytes) == (20, 1 << 20)
    assert limits.note_bytes == 65536  # the others keep their defaults


@pytest.mark.parametrize(
    ("limits", "named"),
    [
        ({"memo": 5}, "ctxmw.limits.memo is not a limit"),
        ({"memo_bytes": 0}, "ctxmw.limits.memo_bytes must be a whole number above 0, got 0"),
        ({"note_bytes": 1.5}, "ctxmw.limits.note_bytes must be a whole number above 0"),
        ([100], "ctxmw.limits must be a mapping"),
    ],
)
def test_a_bad_limit_stops_the_start_up_naming_it(limits: object, named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        config_from_mapping({"ctxmw": {"limits": limits}})
