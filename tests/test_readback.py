"""Read-back: a compacted result's handle and line ranges give the model the original back."""

from __future__ import annotations

import json
import re

import anyio
from hypothesis import given
from hypothesis import strategies as st

from ctxmw.context._record import handle_for
from ctxmw.context.offload import MemoryResultStore, OffloadedResult
from ctxmw.context.readback import (
    READBACK_TOOL,
    answer,
    find_original,
    read_back,
    split_readbacks,
)
from ctxmw.messages.numbering import numbering
from ctxmw.messages.outline import outline

H = "0123456789abcdef"
NUMBERED = "\n".join(f"{i:>6}→row {i}" for i in range(10, 60))  # a read from line 10
PLAIN = "\n".join(f"row {i}" for i in range(1, 51))


def call(args: object, name: str = "ctxmw_expand", id_: str = "r1") -> dict[str, object]:
    raw = args if isinstance(args, str) else json.dumps(args)
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": raw}}


def body(text: str) -> list[str]:
    return text.split("\n")[1:]


def test_a_numbered_result_is_read_by_the_numbers_it_shows_without_a_gutter() -> None:
    out = read_back(NUMBERED, H, {"start": 20, "end": 22}, 8000)
    assert body(out) == ["    20→row 20", "    21→row 21", "    22→row 22"]
    assert out.startswith(f"[{H}: lines 20-22 of 50;")


def test_other_results_are_counted_from_one_and_numbered_in_a_gutter() -> None:
    out = read_back(PLAIN, H, {"start": 3, "end": 4}, 8000)
    assert body(out) == ["     3\trow 3", "     4\trow 4"]
    assert "not part of the text" in out.split("\n")[0]


def test_end_minus_one_is_the_last_line() -> None:
    assert body(read_back(PLAIN, H, {"start": 49, "end": -1}, 8000))[-1] == "    50\trow 50"


def test_a_pattern_returns_its_lines_and_a_few_around() -> None:
    out = read_back(PLAIN, H, {"pattern": "row 25"}, 8000)
    assert [line.split("\t")[1] for line in body(out)] == [f"row {i}" for i in range(22, 29)]


def test_a_page_stops_at_max_chars_and_says_where_to_go_on() -> None:
    out = read_back(PLAIN, H, {"start": 1, "end": -1}, 60)
    first = out.split("\n")[0]
    shown = len(body(out))
    assert f"more from start={shown + 1}" in first
    assert sum(len(line) + 1 for line in body(out)) <= 60


def test_offset_and_limit_read_characters() -> None:
    out = read_back(PLAIN, H, {"offset": 4, "limit": 3}, 8000)
    assert out == f"[{H}: characters 4-7 of {len(PLAIN)}; next offset 7]\n{PLAIN[4:7]}"


def test_a_bad_argument_is_named_and_never_repeated_whole() -> None:
    assert "start=0" in read_back(PLAIN, H, {"start": 0}, 8000)
    assert "end=3" in read_back(PLAIN, H, {"start": 5, "end": 3}, 8000)
    huge = read_back(PLAIN, H, {"pattern": 7}, 8000)
    assert huge.startswith("Error: pattern=7")
    long = "x" * 5_000_000
    out = anyio.run(answer, call({"handle": long}), [])
    assert len(str(out["content"])) < 250


def test_the_answer_comes_from_the_conversation_newest_first() -> None:
    old = {"role": "tool", "tool_call_id": "c1", "content": PLAIN}
    new = {"role": "tool", "tool_call_id": "c1", "content": NUMBERED}
    handle = handle_for("c1", NUMBERED)
    assert find_original(handle, [old, new]) is NUMBERED
    reply = anyio.run(answer, call({"handle": handle, "start": 11, "end": 11}), [old, new])
    assert reply == {"role": "tool", "tool_call_id": "r1", "content": reply["content"]}
    assert body(str(reply["content"])) == ["    11→row 11"]


def test_a_handle_no_longer_in_the_conversation_gets_a_stable_answer() -> None:
    first = anyio.run(answer, call({"handle": H}), [])
    assert first == anyio.run(answer, call({"handle": H}), [])
    assert "no longer in the conversation" in str(first["content"])


def test_the_offload_store_is_looked_in_when_the_conversation_lacks_the_original() -> None:
    store = MemoryResultStore()
    anyio.run(store.put, OffloadedResult(H, "c9", "read", PLAIN, "preview"))
    reply = anyio.run(lambda: answer(call({"handle": H, "start": 2, "end": 2}), [], store=store))
    assert body(str(reply["content"])) == ["     2\trow 2"]


def test_arguments_that_are_not_an_object_are_an_error_text() -> None:
    reply = anyio.run(answer, call("[1, 2"), [])
    assert str(reply["content"]).startswith("Error: the arguments")


def test_a_reply_splits_into_the_callers_calls_and_the_read_backs() -> None:
    own, reads = call({}, name="Read", id_="a"), call({"handle": H}, id_="b")
    assert split_readbacks([own, reads]) == ([own], [reads])


def test_the_schema_is_one_constant() -> None:
    assert READBACK_TOOL["function"]["name"] == "ctxmw_expand"
    assert READBACK_TOOL["function"]["parameters"]["required"] == ["handle"]


def test_numbers_that_go_down_are_not_taken_for_line_numbers() -> None:
    assert not numbering(["3: a", "1: b", "2: c"]).shown
    assert numbering(["  3→a", "", "  5→b"]).shown


_GAP = re.compile(r"… lines? (\d+)(?:-(\d+))?$")


@given(
    st.lists(st.text(alphabet="abc_/.:0123456789 ", max_size=40), min_size=2, max_size=80),
    st.booleans(),
    st.integers(min_value=40, max_value=400),
)
def test_the_outline_and_its_gaps_read_back_give_every_line(
    rows: list[str], numbered: bool, limit: int
) -> None:
    lines = [f"{i:>6}→{row}" for i, row in enumerate(rows, start=1)] if numbered else rows
    text = "\n".join(lines)
    short = outline(text, limit, H)
    if short is text or short.startswith("[compacted: head and tail"):
        return
    assert f"ctxmw_expand handle {H}" in short.split("\n")[0]
    rebuilt: list[str] = []
    for line in short.split("\n")[1:]:
        gap = _GAP.match(line)
        if gap is None:
            rebuilt.append(line)
            continue
        a, b = int(gap.group(1)), int(gap.group(2) or gap.group(1))
        got = body(read_back(text, H, {"start": a, "end": b}, 10**6))
        shown = numbering(text.splitlines()).shown
        rebuilt.extend(got if shown else [g.split("\t", 1)[1] for g in got])
    assert rebuilt == text.splitlines()
