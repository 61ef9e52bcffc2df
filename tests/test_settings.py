"""Settings: the defaults table, CTXMW_ variables read at construction, overrides, errors."""

from __future__ import annotations

import pytest

from ctxmw import Settings, SettingsError
from ctxmw.settings import resolve_settings

SPEC_DEFAULTS = {
    "full_tool_calls": 0,
    "full_tool_outputs": 10,
    "max_tool_calls": 40,
    "max_tool_chars": 100_000,
    "epoch_tool_call_threshold": 50,
    "epoch_full_tool_calls": 20,
    "epoch_compacted_tool_calls": 80,
    "epoch_size": 20,
    "epoch_increment_epochs_per_increase": 3,
    "epoch_increment_size_increase": 10,
    "epoch_increment_repeat_increase": 10,
    "epoch_increment_max_size": 60,
    "epoch_increment_compacted_growth_ratio": 2.0,
    "epoch_increment_max_compacted_tool_calls": 160,
    "short_string_length": 200,
    "short_output_length": 400,
    "shorten_tools_protect_current_turn": False,
}


def test_defaults_match_the_spec() -> None:
    s = Settings()
    assert {key: getattr(s, key) for key in SPEC_DEFAULTS} == SPEC_DEFAULTS
    assert s.resolved_max_tool_outputs == 40


def test_max_tool_outputs_follows_max_tool_calls_unless_set() -> None:
    assert Settings(max_tool_calls=7).resolved_max_tool_outputs == 7
    assert Settings(max_tool_calls=7, max_tool_outputs=3).resolved_max_tool_outputs == 3


def test_environment_is_read_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    before = Settings()
    monkeypatch.setenv("CTXMW_EPOCH_SIZE", "30")
    assert Settings().epoch_size == 30
    assert before.epoch_size == 20


def test_arguments_beat_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXMW_EPOCH_SIZE", "30")
    assert Settings(epoch_size=25).epoch_size == 25
    assert resolve_settings(None, {"epoch_size": 26}).epoch_size == 26
    assert resolve_settings({"epoch_size": 27}).epoch_size == 27


def test_invalid_environment_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXMW_EPOCH_SIZE", "abc")
    with pytest.raises(SettingsError, match=r"CTXMW_EPOCH_SIZE") as info:
        Settings()
    assert "'abc'" in str(info.value)
    assert "environment variable" in str(info.value)


def test_invalid_argument_is_reported_as_an_argument() -> None:
    with pytest.raises(SettingsError, match=r"from argument.*greater than or equal to 0"):
        Settings(full_tool_outputs=-1)


def test_unknown_setting_lists_the_known_ones() -> None:
    with pytest.raises(SettingsError, match=r"Unknown setting 'epoch_sise'.*epoch_size"):
        resolve_settings(None, {"epoch_sise": 3})


def test_negative_or_nonfinite_growth_ratio_becomes_zero() -> None:
    assert (
        Settings(epoch_increment_compacted_growth_ratio=-1).epoch_increment_compacted_growth_ratio
        == 0
    )
    assert (
        Settings(
            epoch_increment_compacted_growth_ratio=float("nan")
        ).epoch_increment_compacted_growth_ratio
        == 0
    )


def test_notice_placeholders_are_checked() -> None:
    with pytest.raises(SettingsError, match=r"unknown placeholder"):
        Settings(compaction_notice="{removed} gone")


def test_settings_object_is_not_a_mapping_of_garbage() -> None:
    with pytest.raises(SettingsError, match=r"neither a ctxmw.Settings nor a mapping"):
        resolve_settings(42)  # type: ignore[arg-type]


def test_overrides_return_a_new_validated_object() -> None:
    base = Settings()
    assert base.with_overrides(None) is base
    assert base.with_overrides({"epoch_size": 5}).epoch_size == 5
    with pytest.raises(SettingsError):
        base.with_overrides({"epoch_size": "many"})


@pytest.mark.parametrize(
    "key", ["PROMPT_STRATEGIES", "MAX_TOOL_OUTPUTS", "EPOCH_SIZE", "TELEMETRY"]
)
def test_an_empty_variable_means_unset(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    monkeypatch.setenv(f"CTXMW_{key}", "")
    assert getattr(Settings(), key.lower()) == Settings.model_fields[key.lower()].default


def test_an_empty_strategy_list_keeps_the_default_strategies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ctxmw.settings import DEFAULT_STRATEGIES
    from ctxmw.strategies._chain import resolve_strategies

    monkeypatch.setenv("CTXMW_PROMPT_STRATEGIES", "")
    names = [name for name, _ in resolve_strategies(None, Settings())]
    assert names == list(DEFAULT_STRATEGIES)
    assert "inbox" in names  # the abort switch stays on


@pytest.mark.parametrize(
    "key", ["CTXMW_CLEAR_TOOL_RESULTS_EXCLUDE_TOOLS", "CTXMW_DURABLE_PATTERNS"]
)
def test_a_non_json_list_variable_is_a_settings_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    monkeypatch.setenv(key, "read_file, grep")
    with pytest.raises(SettingsError, match=key) as info:
        Settings()
    assert "'read_file, grep'" in str(info.value)
    assert "JSON list" in str(info.value)


def test_a_json_list_variable_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXMW_CLEAR_TOOL_RESULTS_EXCLUDE_TOOLS", '["read_file"]')
    assert Settings().clear_tool_results_exclude_tools == ["read_file"]
    assert Settings(clear_tool_results_exclude_tools=["grep"]).clear_tool_results_exclude_tools == [
        "grep"
    ]


def test_the_same_explicit_values_under_the_same_environment_resolve_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[int] = []
    original = Settings.__init__

    def counting(self: Settings, **values: object) -> None:
        built.append(1)
        original(self, **values)

    monkeypatch.setenv("CTXMW_EPOCH_SIZE", "31")
    first = resolve_settings({"full_tool_outputs": 3}, {"epoch_full_tool_calls": 4})
    monkeypatch.setattr(Settings, "__init__", counting)
    again = resolve_settings({"full_tool_outputs": 3}, {"epoch_full_tool_calls": 4})
    assert again is first
    assert built == []
    assert (again.epoch_size, again.full_tool_outputs, again.epoch_full_tool_calls) == (31, 3, 4)


def test_a_changed_environment_variable_is_honoured_by_the_next_resolution(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXMW_EPOCH_SIZE", "31")
    assert resolve_settings(None, {"full_tool_outputs": 3}).epoch_size == 31
    monkeypatch.setenv("CTXMW_EPOCH_SIZE", "32")
    assert resolve_settings(None, {"full_tool_outputs": 3}).epoch_size == 32
    monkeypatch.delenv("CTXMW_EPOCH_SIZE")
    assert resolve_settings(None, {"full_tool_outputs": 3}).epoch_size == 20
    monkeypatch.setenv("ctxmw_epoch_size", "33")  # the prefix is matched in any case
    assert resolve_settings(None, {"full_tool_outputs": 3}).epoch_size == 33


def test_values_of_other_types_are_resolved_apart() -> None:
    as_int = resolve_settings({"economic_break_even": 1})
    as_float = resolve_settings({"economic_break_even": 1.5})
    assert as_int.economic_break_even == 1
    assert as_float.economic_break_even == 1.5
    with pytest.raises(SettingsError, match=r"Unknown setting 'epoch_sise'"):
        resolve_settings({"epoch_sise": 3})
    with pytest.raises(SettingsError, match=r"Unknown setting 'epoch_sise'"):
        resolve_settings({"epoch_sise": 3})  # an error is raised again, never cached
