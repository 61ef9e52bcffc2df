"""The economic schedule's memo (ctxmw/strategies/_economic_memo.py): resumed equals afresh."""

from __future__ import annotations

import json
from typing import Any

from ctxmw import Settings
from ctxmw.messages.pairs import index_tools
from ctxmw.strategies._economic_memo import FoldState, SizeTable, resume_fold
from tests.transcripts import SMALL_WINDOWS


def transcript(rounds: int, tag: str = "") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
    ]
    for k in range(rounds):
        call = {
            "id": f"c{k}",
            "type": "function",
            "function": {"name": "f", "arguments": json.dumps({"k": k})},
        }
        out += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": f"{tag}result {k} " * (5 + k)},
        ]
    return out


def counting_step(calls: list[int]) -> Any:
    """A step that counts the call points it decides and moves the boundary every third one."""

    def make(table: SizeTable) -> Any:
        def step(state: FoldState, point: int) -> FoldState:
            calls.append(point)
            n = len(table.results_at)
            moved = state.moves + 1 if point % 3 == 0 else state.moves
            return FoldState(boundary=min(n, point // 2), rent=state.rent + 1.0, moves=moved)

        return step

    return make


def fold(
    messages: list[dict[str, Any]], memo: dict[str, Any] | None, calls: list[int], key: Any = ("k",)
) -> Any:
    settings = Settings(**SMALL_WINDOWS)
    index = index_tools(messages, None, "test")
    table, last = resume_fold(
        messages, index, settings, key, (), memo, "slot", counting_step(calls)
    )
    return (
        list(table.other),
        list(table.full),
        list(table.compacted),
        list(table.results_at),
    ), last


def test_a_resumed_fold_equals_a_fresh_one_and_decides_only_the_new_points() -> None:
    memo: dict[str, Any] = {}
    fold(transcript(10), memo, [])
    resumed_calls: list[int] = []
    resumed = fold(transcript(12), memo, resumed_calls)
    fresh_calls: list[int] = []
    assert resumed == fold(transcript(12), None, fresh_calls)
    assert len(resumed_calls) < len(fresh_calls) / 3


def test_an_edited_middle_message_refolds_from_there() -> None:
    memo: dict[str, Any] = {}
    fold(transcript(10), memo, [])
    edited = transcript(10)
    edited[9] = {**edited[9], "content": "changed"}
    assert fold(edited, memo, []) == fold(edited, None, [])


def test_another_key_starts_afresh() -> None:
    memo: dict[str, Any] = {}
    fold(transcript(10), memo, [])
    calls: list[int] = []
    fold(transcript(10), memo, calls, key=("other",))
    fresh: list[int] = []
    fold(transcript(10), None, fresh)
    assert len(calls) == len(fresh)


def test_a_transcript_cut_back_to_a_past_call_point_decides_it_once() -> None:
    memo: dict[str, Any] = {}
    longer = transcript(10)
    longer[10:10] = [{"role": "user", "content": "more"}]  # before the call point at 11
    fold(longer, memo, [])
    cut = longer[:11]  # ends just before a call point the memo decided
    calls: list[int] = []
    resumed = fold(cut, memo, calls)
    assert resumed == fold(cut, None, [])
    assert calls.count(len(cut)) == 1
