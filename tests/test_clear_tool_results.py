"""clear_tool_results: LangChain's ClearToolUsesEdit semantics, pairs and ids kept."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
from hypothesis import given, settings

from ctxmw import Settings, UsageError, validate
from ctxmw.context.tokens import LiteLLMCounter
from ctxmw.strategies.clear_tool_results import ClearToolResults, clear_tool_results
from ctxmw.types import Messages, StrategyContext
from tests.transcripts import adjacent_calls, call, group, transcripts

Run = Callable[..., Messages]


one_token = LiteLLMCounter(text_tokens=lambda text: 1)


def results(prompt: Messages) -> list[object]:
    return [m["content"] for m in prompt if m["role"] == "tool"]


def test_under_the_trigger_the_prompt_is_returned_as_is(run: Run) -> None:
    msgs = adjacent_calls(6)
    assert run(clear_tool_results, msgs) is msgs


def test_over_the_trigger_all_but_the_newest_keep_results_are_cleared(run: Run) -> None:
    msgs = adjacent_calls(6)
    before = copy.deepcopy(msgs)
    out = run(clear_tool_results, msgs, clear_tool_results_trigger=0)
    validate(out)
    assert results(out)[:3] == ["[cleared]"] * 3
    assert results(out)[3:] == results(msgs)[3:]
    assert [m.get("tool_call_id") for m in out] == [m.get("tool_call_id") for m in msgs]
    assert msgs == before
    assert out[-1] is msgs[-1]


def test_the_trigger_is_strict_and_counts_the_whole_prompt() -> None:
    msgs = adjacent_calls(5)
    total = sum(one_token.message_tokens("", m) for m in msgs)
    strategy = ClearToolResults(counter=one_token)
    at = StrategyContext(settings=Settings(clear_tool_results_trigger=total))
    below = StrategyContext(settings=Settings(clear_tool_results_trigger=total - 1))
    assert strategy(msgs, at) is msgs
    assert "[cleared]" in results(strategy(msgs, below))


def test_excluded_tools_are_kept_but_count_toward_keep(run: Run) -> None:
    msgs: Messages = [{"role": "user", "content": "go"}]
    for i, name in enumerate(["read", "memory", "read", "read", "memory"]):
        msgs += group([call(f"c{i}", name)], [f"out {i}"])
    out = run(
        clear_tool_results,
        msgs,
        clear_tool_results_trigger=0,
        clear_tool_results_keep=2,
        clear_tool_results_exclude_tools=["memory"],
    )
    assert results(out) == ["[cleared]", "out 1", "[cleared]", "out 3", "out 4"]


def test_exclude_tools_reads_a_json_list_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXMW_CLEAR_TOOL_RESULTS_EXCLUDE_TOOLS", '["memory", "todo"]')
    assert Settings().clear_tool_results_exclude_tools == ["memory", "todo"]


def test_clear_tool_inputs_empties_only_the_cleared_calls_arguments(run: Run) -> None:
    msgs: Messages = [{"role": "user", "content": "go"}]
    msgs += group([call("a", path="x"), call("b", path="y")], ["1", "2"])
    msgs += group([call("c", path="z")], ["3"])
    out = run(
        clear_tool_results,
        msgs,
        clear_tool_results_trigger=0,
        clear_tool_results_keep=2,
        clear_tool_results_clear_tool_inputs=True,
    )
    validate(out)
    first = out[1]["tool_calls"]
    assert [tc["function"]["arguments"] for tc in first] == ["{}", '{"path": "y"}']
    assert out[4] is msgs[4]
    assert msgs[1]["tool_calls"][0]["function"]["arguments"] == '{"path": "x"}'


def test_options_have_one_home_the_settings() -> None:
    with pytest.raises(UsageError, match=r"strategy_options=\{'clear_tool_results_keep': 1\}"):
        ClearToolResults(keep=1)  # type: ignore[call-arg]
    overrides = {
        "clear_tool_results_keep": 1,
        "clear_tool_results_trigger": 0,
        "clear_tool_results_placeholder": "[gone]",
    }
    ctx = StrategyContext(settings=Settings(**overrides))
    out = ClearToolResults()(adjacent_calls(3), ctx)
    assert results(out)[:2] == ["[gone]", "[gone]"]
    assert ctx.stats["clear_tool_results"] == {
        "triggered": True,
        "cleared": 2,
        "placeholder": "[gone]",
    }


def test_recomputed_every_call_so_the_boundary_moves(run: Run) -> None:
    msgs = adjacent_calls(8)
    earlier = run(clear_tool_results, msgs[:-2], clear_tool_results_trigger=0)
    later = run(clear_tool_results, msgs, clear_tool_results_trigger=0)
    assert later[: len(earlier)] != earlier


@settings(max_examples=60, deadline=None)
@given(messages=transcripts())
def test_valid_in_valid_out_untouched_and_deterministic(messages: Messages) -> None:
    validate(messages)
    before = copy.deepcopy(messages)
    strategy = ClearToolResults(counter=one_token)
    overrides = {
        "clear_tool_results_trigger": 0,
        "clear_tool_results_keep": 1,
        "clear_tool_results_clear_tool_inputs": True,
    }
    out = strategy(messages, StrategyContext(settings=Settings(**overrides)))
    validate(out)
    assert messages == before
    assert strategy(messages, StrategyContext(settings=Settings(**overrides))) == out
