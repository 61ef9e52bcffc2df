"""repair_tool_pairs: drops orphans so any imported history validates."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ctxmw import validate
from ctxmw.settings import Settings
from ctxmw.strategies.repair_tool_pairs import repair_tool_pairs
from ctxmw.types import Messages, StrategyContext
from tests.transcripts import call, group

Run = Callable[..., Messages]
U = {"role": "user", "content": "go"}


def test_valid_input_is_returned_as_is(run: Run) -> None:
    msgs = [U, *group([call("a")], ["1"])]
    assert run(repair_tool_pairs, msgs) is msgs


def test_orphan_result_and_unanswered_call_are_dropped(run: Run) -> None:
    msgs = [
        U,
        {"role": "tool", "tool_call_id": "ghost", "content": "?"},
        {"role": "assistant", "content": "let me look", "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        U,
    ]
    out = run(repair_tool_pairs, msgs)
    validate(out)
    assert [m.get("tool_call_id") for m in out if m["role"] == "tool"] == ["a"]
    assert [tc["id"] for tc in out[1]["tool_calls"]] == ["a"]
    assert msgs[2]["tool_calls"][1]["id"] == "b"  # input untouched


def test_assistant_left_without_calls_or_text_is_dropped(run: Run) -> None:
    msgs = [U, {"role": "assistant", "content": None, "tool_calls": [call("a")]}, U]
    assert run(repair_tool_pairs, msgs) == [U, U]


def test_assistant_with_text_keeps_its_text(run: Run) -> None:
    msgs = [U, {"role": "assistant", "content": "thinking", "tool_calls": "garbage"}]
    assert run(repair_tool_pairs, msgs) == [U, {"role": "assistant", "content": "thinking"}]


def test_duplicate_ids_in_one_message_keep_the_first(run: Run) -> None:
    msgs = [U, *group([call("a"), call("a")], ["1", "2"])]
    out = run(repair_tool_pairs, msgs)
    validate(out)
    assert len(out[1]["tool_calls"]) == 1


_broken_message = st.one_of(
    st.just({"role": "user", "content": "u"}),
    st.just({"role": "assistant", "content": "a"}),
    st.just({"content": "no role"}),
    st.just({"role": "assistant", "tool_calls": "bad"}),
    st.builds(
        lambda ids: {"role": "assistant", "content": None, "tool_calls": [call(i) for i in ids]},
        st.lists(st.sampled_from("abcd"), max_size=3),
    ),
    st.builds(
        lambda i: {"role": "tool", "tool_call_id": i, "content": "r"}, st.sampled_from("abcdz")
    ),
)


@given(st.lists(_broken_message, max_size=25))
def test_any_history_validates_after_repair(msgs: list[Any]) -> None:
    out = repair_tool_pairs(msgs, StrategyContext(settings=Settings()))
    validate(out)
