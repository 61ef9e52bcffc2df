"""messages/history.py: the chain's input as dicts, compared once per call with the last."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmw.history import History, as_dicts, history_of
from ctxmw.history import _history as history_module
from tests._incremental import growing_rounds, run_chain
from tests.transcripts import adjacent_calls, call, group


class _Mapping(Mapping[str, Any]):
    """A caller's message type that is not a dict but compares equal to one."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def test_the_input_is_a_new_list_of_dicts_and_the_callers_is_left_alone() -> None:
    history: list[Any] = list(adjacent_calls(6))
    history[3] = _Mapping(dict(history[3]))
    before = list(history)
    for convert in (as_dicts, History().update):
        out = convert(history)
        assert out is not history
        assert out == [dict(m) for m in before]
        assert all(type(m) is dict for m in out)
        assert history == before
        assert history[3] is before[3]


def test_a_kept_slot_converts_only_what_is_past_the_identical_head() -> None:
    memo: dict[str, Any] = {}
    history: list[Any] = list(adjacent_calls(6))
    history[2] = _Mapping(dict(history[2]))
    kept = history_of(memo, ("x",))
    first = kept.update(history)
    longer = [*history, _Mapping({"role": "user", "content": "more"})]
    second = kept.update(longer)
    assert second[2] is first[2]  # the head's conversion is reused, not made again
    assert second[-1] == {"role": "user", "content": "more"}
    assert type(second[-1]) is dict
    # What changed, for the strategies' helpers: the previous input, then one new message.
    assert (kept.revision, kept.unchanged, kept.same) == (2, len(history), len(history))
    assert kept.previous == first
    assert kept.messages == second
    assert kept.messages is not second  # a copy nobody changes
    # Another chain on the same memo has a History of its own, which starts afresh.
    other = history_of(memo, ("y",))
    assert other is not kept
    assert other.update(longer) == second
    assert other.revision == 1
    assert other.unchanged == 0


def test_a_warm_call_checks_the_types_of_the_new_messages_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked: list[int] = []
    original = history_module._mixed
    monkeypatch.setattr(
        history_module, "_mixed", lambda ms: checked.append(len(ms)) or original(ms)
    )
    memo: dict[str, Any] = {}
    for history in growing_rounds(100, 3):
        run_chain(history, "shorten_tools_epoch", memo)
    assert checked[0] > 200
    assert checked[1:] == [2, 2]


def test_non_dict_messages_are_converted_as_afresh_with_a_kept_memo() -> None:
    memo: dict[str, Any] = {}
    history: list[Any] = list(adjacent_calls(20))
    history[5] = _Mapping(dict(history[5]))
    for k in range(4):
        extra = group([call(f"m{k}", "read", path=f"m{k}")], [f"out {k}" * 40])
        # Some rounds come as mappings, some as dicts; the head is sent again as it was.
        history = [*history, *(map(_Mapping, extra) if k % 2 else extra)]
        warm, _ = run_chain(history, "shorten_tools_epoch", memo)
        fresh, _ = run_chain(history, "shorten_tools_epoch", {})
        assert warm == fresh
        assert all(type(m) is dict for m in warm)
    rebuilt = [dict(m) if isinstance(m, dict) else _Mapping(dict(m)) for m in history]
    out, _ = run_chain(rebuilt, "shorten_tools_epoch", memo)
    assert out == fresh
    # Equal dicts rebuilt by the caller: the prompt shows this call's objects.
    assert out[0] is rebuilt[0]
    assert out[-4] is rebuilt[-4]  # the last dict round (the last one came as mappings)


# What a caller does to its list between two calls.
STEPS = [
    "append",
    "append_mapping",
    "edit",
    "rebuild",
    "drop_last",
    "insert",
    "same",
    "grow_told",
    "told_new_list",
]


def _expected(previous: list[Any], current: list[Any]) -> tuple[int, int]:
    """The answer by brute force: equal messages at the start, then identical objects."""
    equal = 0
    while equal < min(len(previous), len(current)) and previous[equal] == current[equal]:
        equal += 1
    same = 0
    while same < equal and previous[same] is current[same]:
        same += 1
    return equal, same


@given(st.lists(st.sampled_from(STEPS), min_size=1, max_size=12), st.randoms())
@settings(max_examples=150, deadline=None)
def test_the_answer_is_what_comparing_the_two_calls_gives(steps: list[str], rnd: Any) -> None:
    kept = History()
    given: list[Any] = list(adjacent_calls(3))
    out = kept.update(given)
    for n, step in enumerate(steps):
        if step == "grow_told":  # the conversation's own list, grown in place, and it says so
            given.append({"role": "user", "content": f"told {n}"})
            kept.grows(given)
        elif step == "told_new_list":  # a Session whose record was reloaded: a new list object
            given = _changed(given, "edit", n, rnd)
            kept.grows(given)
        else:
            given = _changed(given, step, n, rnd)
        before = kept.messages
        out = kept.update(given)
        assert out == [dict(m) for m in given]
        assert all(type(m) is dict for m in out)
        assert kept.previous is before
        assert kept.messages == out
        assert kept.messages is not out  # the strategies may append to theirs
        equal, same = _expected(before, out)
        assert (kept.unchanged, kept.same) == (equal, same)
        assert kept.revision == n + 2


def _changed(given: list[Any], step: str, n: int, rnd: Any) -> list[Any]:
    new = list(given)
    at = rnd.randrange(len(new)) if new else 0
    if step == "append":
        new.append({"role": "user", "content": f"more {n}"})
    elif step == "append_mapping":
        new.append(_Mapping({"role": "user", "content": f"mapped {n}"}))
    elif step == "edit" and new:
        new[at] = {**dict(new[at]), "content": f"edited {n}"}
    elif step == "rebuild":  # equal dicts, new objects: the framework that rebuilds each call
        new = [dict(m) for m in new]
    elif step == "drop_last" and new:
        new.pop()
    elif step == "insert":
        new.insert(at, {"role": "user", "content": f"inserted {n}"})
    return new
