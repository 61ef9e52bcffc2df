"""ctxmw.validate: each wire rule, named with the index of the first offending message."""

from __future__ import annotations

from typing import Any

import pytest

from ctxmw import InvalidTranscriptError, UsageError, validate
from tests.transcripts import call, group

U = {"role": "user", "content": "go"}


def test_valid_transcripts_pass() -> None:
    validate(
        [U, *group([call("a"), call("b")], ["1", "2"]), {"role": "assistant", "content": "done"}]
    )
    validate([])


@pytest.mark.parametrize(
    ("messages", "index", "pattern"),
    [
        ([U, {"content": "x"}], 1, "no role"),
        ([U, "hello"], 1, "no role"),
        (
            [U, {"role": "tool", "tool_call_id": "zz", "content": "r"}],
            1,
            "'zz' has no earlier call",
        ),
        ([U, {"role": "assistant", "tool_calls": {"id": "a"}}], 1, "tool_calls is a dict"),
        (
            [U, *group([call("a"), call("a")], ["1", "2"])],
            1,
            "duplicate tool_call id 'a' in one message",
        ),
        ([U, {"role": "assistant", "content": "x", "tool_calls": []}], 1, "an empty list"),
        (
            [
                U,
                {"role": "assistant", "tool_calls": [call("a")]},
                {"role": "system", "content": "be brief"},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
            ],
            1,
            "'a' has no result before the system message at 2",
        ),
        (
            [U, {"role": "assistant", "tool_calls": [call("a")]}, U],
            1,
            "'a' has no result before the user message at 2",
        ),
        ([U, {"role": "assistant", "tool_calls": [call("a")]}], 1, "end of the transcript"),
        ([U, {"role": "assistant", "tool_calls": [{"type": "function"}]}], 1, "no string id"),
    ],
)
def test_each_rule_names_its_index(messages: list[Any], index: int, pattern: str) -> None:
    with pytest.raises(InvalidTranscriptError, match=pattern) as info:
        validate(messages)
    assert info.value.index == index
    assert isinstance(info.value, UsageError)


def test_result_after_the_turn_closed_is_not_open_here() -> None:
    late = [U, {"role": "assistant", "tool_calls": [call("a")]}, U]
    late.append({"role": "tool", "tool_call_id": "a", "content": "late"})
    with pytest.raises(InvalidTranscriptError) as info:
        validate(late)
    assert info.value.index == 1  # the first problem: the call went unanswered


def test_first_problem_wins() -> None:
    msgs = [{"content": "no role"}, {"role": "tool", "tool_call_id": "x", "content": ""}]
    with pytest.raises(InvalidTranscriptError) as info:
        validate(msgs)
    assert info.value.index == 0


def test_an_id_reused_by_a_later_group_pairs_within_its_group() -> None:
    # Real transcripts reuse ids across turns (call_0, call_1, ... every turn): each result
    # answers the call of its own group.
    validate([U, *group([call("a")], ["1"]), U, *group([call("a")], ["2"])])
    validate([U, *group([call("a"), call("b")], ["1", "2"]), *group([call("b")], ["3"])])


def test_a_result_answering_an_earlier_group_is_not_of_its_group() -> None:
    msgs = [U, *group([call("a")], ["1"]), *group([call("b")], ["2"])]
    msgs.append({"role": "tool", "tool_call_id": "a", "content": "again"})
    with pytest.raises(InvalidTranscriptError, match="not a call of its tool group") as info:
        validate(msgs)
    assert info.value.index == 5


def tool_use(use_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": use_id, "name": "read", "input": {"path": "a"}},
        ],
    }


def tool_result(use_id: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": use_id, "content": "text"}],
    }


def test_anthropic_native_tool_blocks_pair_with_the_next_message() -> None:
    validate([U, tool_use("u1"), tool_result("u1"), {"role": "assistant", "content": "done"}])


@pytest.mark.parametrize(
    ("messages", "index", "pattern"),
    [
        ([U, tool_use("u1"), U, tool_result("u1")], 1, "'u1' has no tool_result in the next"),
        ([U, tool_result("u1")], 1, "tool_result block answers 'u1'"),
        ([U, tool_use("u1")], 1, "'u1' has no tool_result before the end"),
    ],
)
def test_a_split_native_tool_block_is_invalid(
    messages: list[Any], index: int, pattern: str
) -> None:
    with pytest.raises(InvalidTranscriptError, match=pattern) as info:
        validate(messages)
    assert info.value.index == index
