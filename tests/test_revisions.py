"""The record of a conversation whose caller edits its history: plan, format, replay, tears."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmw import InvalidTranscriptError
from ctxmw.messages.normal import normal_key
from ctxmw.runtime.revisions import Edit, plan_history, replay
from ctxmw.runtime.transcript import TranscriptFile, dump_line

pytestmark = pytest.mark.anyio

SYSTEM = {"role": "system", "content": "Be brief."}
USER = {"role": "user", "content": "Add 2 and 2."}
CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    ],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "4"}
ANSWER = {"role": "assistant", "content": "4."}
MORE = {"role": "user", "content": "Thanks."}


def test_a_grown_history_is_an_append() -> None:
    plan = plan_history([SYSTEM, USER], [False, False], [SYSTEM, USER, CALL])
    assert plan.edit is None
    assert plan.appended == [CALL]
    assert plan.conversation == [SYSTEM, USER, CALL]


def test_a_tool_call_resent_with_content_none_is_not_new() -> None:
    resent = {**CALL, "content": None}
    plan = plan_history([SYSTEM, USER, CALL], [False] * 3, [SYSTEM, USER, resent, RESULT])
    assert plan.edit is None
    assert plan.appended == [RESULT]
    # What is sent is the caller's own message, once.
    assert plan.conversation == [SYSTEM, USER, resent, RESULT]


def test_a_restarted_turn_drops_the_round_the_caller_dropped() -> None:
    plan = plan_history([SYSTEM, USER, CALL], [False] * 3, [SYSTEM, USER])
    assert plan.conversation == [SYSTEM, USER]
    assert plan.edit == Edit(((2, 1, 0),), ())


def test_removed_tool_items_are_not_restored() -> None:
    stored = [SYSTEM, USER, CALL, RESULT, ANSWER]
    given = [SYSTEM, USER, ANSWER, MORE]
    plan = plan_history(stored, [False] * 5, given)
    assert plan.conversation == given
    assert plan.edit is not None


def test_ctxmws_own_tool_round_is_restored_before_its_answer() -> None:
    stored = [SYSTEM, USER, CALL, RESULT, ANSWER]
    ours = [False, False, True, True, False]
    plan = plan_history(stored, ours, [SYSTEM, USER, ANSWER, MORE])
    assert plan.conversation == [SYSTEM, USER, CALL, RESULT, ANSWER, MORE]
    assert plan.edit is None
    assert plan.appended == [MORE]


@pytest.mark.parametrize(
    "given",
    [
        [SYSTEM, USER, MORE],  # not the answer that followed the round
        [SYSTEM, USER],  # no answer at all
        [{"role": "system", "content": "Other."}, USER, ANSWER, MORE],  # history before differs
    ],
)
def test_ctxmws_round_is_not_restored_unless_the_history_is_exactly_before_and_after(
    given: list[dict[str, Any]],
) -> None:
    stored = [SYSTEM, USER, CALL, RESULT, ANSWER]
    plan = plan_history(stored, [False, False, True, True, False], given)
    assert plan.conversation == given


def test_a_moving_system_prompt_edits_one_message() -> None:
    stored = [SYSTEM, USER, ANSWER]
    moved = {"role": "system", "content": "Be brief. Time: 10:01."}
    plan = plan_history(stored, [False] * 3, [moved, USER, ANSWER, MORE])
    assert plan.edit == Edit(((0, 1, 1), (3, 0, 1)), (moved, MORE))


def test_edit_apply_keeps_the_marks_of_kept_messages() -> None:
    edit = Edit(((0, 1, 1),), (MORE,))
    messages, ours = edit.apply([SYSTEM, CALL, RESULT], [False, True, True])
    assert messages == [MORE, CALL, RESULT]
    assert ours == [False, True, True]


async def test_revisions_round_trip_through_the_file(tmp_path: Path) -> None:
    file = TranscriptFile(tmp_path / "agent.jsonl")
    await file.append([SYSTEM, USER, CALL])
    await file.append([ANSWER], edit=Edit(((2, 1, 0),), ()))
    await file.append([CALL, RESULT, ANSWER], ours=[True, True, False])
    reread = TranscriptFile(file.path)
    revisions = await reread.revisions()
    assert revisions.earlier == [[SYSTEM, USER, CALL]]
    assert revisions.current == [SYSTEM, USER, ANSWER, CALL, RESULT, ANSWER]
    assert await reread.load() == revisions.current
    assert reread.ours == [False, False, False, True, True, False]
    lines = [json.loads(line) for line in file.path.read_text().splitlines()]
    assert lines[3] == {"ctxmw": "edit", "ops": [[2, 1, 0]], "bytes": 0}
    loop_bytes = len(dump_line(CALL)) + len(dump_line(RESULT))
    assert lines[5] == {"ctxmw": "tool_loop", "count": 2, "bytes": loop_bytes}


async def test_a_file_that_only_grew_is_plain_messages(tmp_path: Path) -> None:
    file = TranscriptFile(tmp_path / "agent.jsonl")
    await file.append([SYSTEM, USER])
    await file.append([ANSWER])
    assert file.path.read_bytes() == b"".join(map(dump_line, [SYSTEM, USER, ANSWER]))


async def test_an_edit_whose_lines_a_torn_write_cut_off_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    size = 2 * len(dump_line(MORE))  # the write held two lines; the crash left one
    edit = dump_line({"ctxmw": "edit", "ops": [[0, 1, 2]], "bytes": size})
    path.write_bytes(dump_line(SYSTEM) + dump_line(USER) + edit + dump_line(MORE))
    file = TranscriptFile(path)
    assert await file.load() == [SYSTEM, USER]
    await file.append([ANSWER])
    assert await TranscriptFile(path).load() == [SYSTEM, USER, ANSWER]


@pytest.mark.parametrize(
    "record",
    [
        {"ctxmw": "edit", "ops": [[5, 1, 0]]},
        {"ctxmw": "edit", "ops": "all"},
        {"ctxmw": "rewind"},
    ],
)
async def test_a_record_that_cannot_apply_is_an_error_that_names_it(
    tmp_path: Path, record: dict[str, Any]
) -> None:
    path = tmp_path / "agent.jsonl"
    path.write_bytes(dump_line(SYSTEM) + dump_line(record) + dump_line(USER))
    with pytest.raises(InvalidTranscriptError, match="cannot be applied"):
        await TranscriptFile(path).load()


def test_replay_keeps_every_revision() -> None:
    lines = [
        SYSTEM,
        USER,
        {"ctxmw": "edit", "ops": [[0, 1, 1]]},
        {"role": "system", "content": "v2"},
        ANSWER,
        {"ctxmw": "edit", "ops": [[0, 1, 1]]},
        {"role": "system", "content": "v3"},
    ]
    revisions = replay(lines, keep_earlier=True)
    assert revisions.earlier == [
        [SYSTEM, USER],
        [{"role": "system", "content": "v2"}, USER, ANSWER],
    ]
    assert revisions.current == [{"role": "system", "content": "v3"}, USER, ANSWER]


def _message(kind: int, spelled: bool) -> dict[str, Any]:
    if kind % 3 == 2:  # a tool-calling assistant message, in either spelling of empty content
        call = {"id": f"c{kind}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        return {"role": "assistant", "content": "" if spelled else None, "tool_calls": [call]}
    return {"role": "user" if kind % 3 == 0 else "assistant", "content": f"m{kind}"}


@settings(max_examples=60, deadline=None)
@given(
    stored=st.lists(st.integers(0, 8), max_size=14),
    hinted=st.integers(0, 14),
    given_=st.lists(st.integers(0, 8), max_size=16),
    keep=st.integers(0, 14),
)
def test_a_hint_and_cached_keys_never_change_the_plan(
    stored: list[int], hinted: int, given_: list[int], keep: int
) -> None:
    """With the previous call's messages as the hint (re-spelled, rebuilt) the plan is the same
    conversation and its edit gives the same revision as planning from nothing."""
    record = [_message(k, True) for k in stored]
    hint = [_message(k, False) for k in stored[:hinted]]  # same messages, the caller's spelling
    caller = [_message(k, False) for k in [*stored[:keep], *given_]]
    ours = [False] * len(record)
    cold = plan_history(record, ours, caller)
    keys: dict[int, tuple[Any, str]] = {}
    for _ in range(2):  # the second time with the keys the first one cached
        warm = plan_history(record, ours, caller, hint=hint, keys=keys)
        assert all(a is b for a, b in zip(warm.conversation, cold.conversation, strict=True))
        assert (warm.edit is None) == (cold.edit is None)
        assert warm.appended == cold.appended
        if warm.edit is not None and cold.edit is not None:
            after_warm, _ = warm.edit.apply(record, ours)
            after_cold, _ = cold.edit.apply(record, ours)
            assert [normal_key(m) for m in after_warm] == [normal_key(m) for m in after_cold]
            assert [normal_key(m) for m in after_warm] == [normal_key(m) for m in caller]
