"""PrefixTracker: exact totals, per-message caching, marks, tools as the first block."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import litellm

from ctxmw.telemetry import ApproxCounter, PrefixTracker, canonical_bytes, common_prefix_length
from ctxmw.telemetry.marks import with_mark
from tests._synthetic import TOOLS, session


class CountingCounter(ApproxCounter):
    """ApproxCounter that records which messages it was asked to count."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Mapping[str, Any]] = []

    def message_tokens(self, model: str, message: Mapping[str, Any]) -> int:
        self.seen.append(message)
        return super().message_tokens(model, message)

    def tools_tokens(self, model: str, tools: Sequence[Mapping[str, Any]], has_system: bool) -> int:
        return super().tools_tokens(model, tools, has_system)


def test_local_prompt_tokens_equal_litellm_token_counter_on_the_whole_payload() -> None:
    messages, _ = session(12)
    for tools in (None, TOOLS):
        result = PrefixTracker().observe("gpt-4o", messages, tools)
        assert result.prompt_tokens == litellm.token_counter(
            model="gpt-4o", messages=messages, tools=tools
        )


def test_old_messages_are_never_recounted() -> None:
    messages, points = session(30)
    counter = CountingCounter()
    tracker = PrefixTracker(counter)
    tracker.observe("m", messages[: points[10]], TOOLS)
    counter.seen.clear()
    result = tracker.observe("m", messages[: points[11]], TOOLS)
    assert counter.seen == messages[points[10] : points[11]]
    assert not result.broke
    assert result.common_messages == points[10]


def test_an_equal_copy_is_not_recounted_but_an_edit_breaks_the_prefix() -> None:
    messages, _ = session(10)
    counter = CountingCounter()
    tracker = PrefixTracker(counter)
    tracker.observe("m", messages, None)
    counter.seen.clear()
    copies = [dict(m) for m in messages]
    assert not tracker.observe("m", copies, None).broke
    assert counter.seen == []
    edited = [*copies[:3], {**copies[3], "content": "changed"}, *copies[4:]]
    result = tracker.observe("m", edited, None)
    assert (result.broke, result.first_diff) == (True, 3)


def test_a_changed_tools_list_leaves_no_prefix() -> None:
    messages, _ = session(5)
    tracker = PrefixTracker(ApproxCounter())
    tracker.observe("m", messages, TOOLS)
    result = tracker.observe(
        "m", messages, [*TOOLS, {"type": "function", "function": {"name": "x"}}]
    )
    assert (result.prefix_tokens, result.tools_changed, result.broke) == (0, True, True)


def test_moved_cache_marks_do_not_break_the_prefix() -> None:
    messages, _ = session(5)
    tracker = PrefixTracker(ApproxCounter())
    first = [*messages[:-1], with_mark(messages[-1])]
    tracker.observe("m", first, None)
    second = [*messages, {"role": "user", "content": "next"}]
    second[-1] = with_mark(second[-1])
    result = tracker.observe("m", second, None)
    assert not result.broke
    assert result.marked_prefix_tokens == result.prefix_tokens > 0


def test_marked_prefix_stops_at_the_previous_calls_last_mark() -> None:
    messages, _ = session(8)
    counter = ApproxCounter()
    tracker = PrefixTracker(counter)
    marked = list(messages)
    marked[2] = with_mark(messages[2])
    tracker.observe("m", marked, None)
    result = tracker.observe("m", [*messages, {"role": "user", "content": "more"}], None)
    assert result.marked_prefix_tokens == sum(counter.message_tokens("m", m) for m in messages[:3])


def test_canonical_form_ignores_marks_and_a_lone_text_part() -> None:
    plain = {"role": "user", "content": "hi"}
    assert canonical_bytes(with_mark(plain)) == canonical_bytes(plain)
    assert canonical_bytes({"role": "user", "content": "hi", "name": "a"}) != canonical_bytes(plain)


def test_common_prefix_length() -> None:
    assert common_prefix_length([b"a", b"b"], [b"a", b"b", b"c"]) == 2
    assert common_prefix_length([b"a", b"b"], [b"a", b"x", b"c"]) == 1
    assert common_prefix_length([b"a", b"b", b"c"], [b"a", b"b"]) == 2
    assert common_prefix_length([], [b"a"]) == 0
