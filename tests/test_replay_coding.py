"""The generated coding-agent runs: valid, deterministic, shaped as promised, and full of reuse."""

from __future__ import annotations

import pytest

from ctxmw import validate
from ctxmw.replay import call_points
from ctxmw.replay.coding import coding_session, swe_run
from ctxmw.replay.loss import ReferenceIndex
from ctxmw.types import Messages


def _results(messages: Messages) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


@pytest.mark.parametrize("seed", range(4))
def test_a_swe_run_is_a_valid_bash_run_of_30_to_120_calls(seed: int) -> None:
    messages = swe_run(seed)
    validate(messages)
    assert 30 <= len(_results(messages)) <= 120
    calls = {tc["function"]["name"] for m in messages for tc in m.get("tool_calls") or []}
    assert calls == {"bash"}
    assert [m["role"] for m in messages].count("user") == 1
    assert max(len(r) for r in _results(messages)) <= 10_000


def test_a_coding_session_has_exactly_n_calls_and_several_requests() -> None:
    messages = coding_session(300, seed=2)
    validate(messages)
    assert len(_results(messages)) == 300
    assert [m["role"] for m in messages].count("user") >= 3
    names = {tc["function"]["name"] for m in messages for tc in m.get("tool_calls") or []}
    assert names <= {"Read", "Edit", "Grep", "Glob", "Bash"}


def test_the_same_arguments_give_the_same_run() -> None:
    assert swe_run(5) == swe_run(5)
    assert swe_run(5) != swe_run(6)
    assert coding_session(50, seed=1) == coding_session(50, seed=1)
    assert swe_run(1, n_calls=40) != swe_run(1)


def test_most_next_actions_reuse_what_a_tool_result_showed() -> None:
    messages = swe_run(0)
    index = ReferenceIndex(messages)
    points = call_points(messages)
    with_references = [p for p in points if index.references(p)]
    assert len(with_references) > len(points) // 2
