"""PrefixTracker: exact totals, per-message caching, marks, tools as the first block."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import litellm
import pytest

from ctxmw.telemetry import (
    ApproxCounter,
    LiteLLMCounter,
    PrefixTracker,
    canonical_bytes,
    common_prefix_length,
)
from ctxmw.telemetry.counters import template_tools_tokens
from ctxmw.telemetry.marks import with_mark
from ctxmw.telemetry.prefix import shared_text
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
    k = len(messages) - 5
    marked[k] = with_mark(messages[k])
    tracker.observe("m", marked, None)
    # The entry is only read through a mark of this call within the 20-block lookback.
    tail = with_mark({"role": "user", "content": "more"})
    result = tracker.observe("m", [*messages, tail], None)
    expected = sum(counter.message_tokens("m", m) for m in messages[: k + 1])
    assert result.marked_prefix_tokens == expected
    tracker.observe("m", marked, None)
    unmarked = tracker.observe("m", [*messages, {"role": "user", "content": "more"}], None)
    assert unmarked.marked_prefix_tokens == 0  # no breakpoint in the request: nothing is read
    tracker.observe("m", [*messages[:3], with_mark(messages[3]), *messages[4:]], None)
    far = tracker.observe("m", [*messages, tail], None)  # 29 blocks from that mark to this one
    assert far.marked_prefix_tokens == 0


def test_canonical_form_ignores_marks_and_a_lone_text_part() -> None:
    plain = {"role": "user", "content": "hi"}
    assert canonical_bytes(with_mark(plain)) == canonical_bytes(plain)
    assert canonical_bytes({"role": "user", "content": "hi", "name": "a"}) != canonical_bytes(plain)


def test_common_prefix_length() -> None:
    assert common_prefix_length([b"a", b"b"], [b"a", b"b", b"c"]) == 2
    assert common_prefix_length([b"a", b"b"], [b"a", b"x", b"c"]) == 1
    assert common_prefix_length([b"a", b"b", b"c"], [b"a", b"b"]) == 2
    assert common_prefix_length([], [b"a"]) == 0


NOTICE = "[Context note] Older tool activity was compacted: {n} messages are shortened."


def _with_notice(messages: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    return [*messages[:2], {"role": "user", "content": NOTICE.format(n=n)}, *messages[2:]]


def test_an_edited_message_credits_its_unchanged_leading_words() -> None:
    messages, _ = session(4)
    counter = ApproxCounter(bytes_per_token=1)
    tracker = PrefixTracker(counter)
    tracker.observe("m", _with_notice(messages, 6), None)
    result = tracker.observe("m", _with_notice(messages, 10), None)
    shared = "[Context note] Older tool activity was compacted:"
    assert (result.broke, result.first_diff) == (True, 2)
    assert result.partial_tokens == len(f'"{shared}"') - len('""')
    assert result.prefix_tokens == sum(counter.message_tokens("m", m) for m in messages[:2])


def test_no_partial_credit_across_roles_tools_or_without_a_break() -> None:
    messages, _ = session(4)
    tracker = PrefixTracker(ApproxCounter())
    tracker.observe("m", _with_notice(messages, 6), TOOLS)
    same = tracker.observe(
        "m", [*_with_notice(messages, 6), {"role": "user", "content": "x"}], TOOLS
    )
    more_tools = [*TOOLS, {"type": "function", "function": {"name": "x"}}]
    other_tools = tracker.observe("m", _with_notice(messages, 10), more_tools)
    other_role = tracker.observe(
        "m", [*messages[:2], {"role": "assistant", "content": NOTICE}, *messages[2:]], more_tools
    )
    assert [same.partial_tokens, other_tools.partial_tokens, other_role.partial_tokens] == [0] * 3
    assert other_role.broke


@pytest.mark.parametrize(
    ("previous", "current", "shared"),
    [
        ("alpha beta gamma", "alpha beta delta", "alpha beta"),
        ("alpha beta", "alpha beta gamma", "alpha beta"),
        ("line one\nline two", "line one\nline 2x", "line one\nline"),
        ("abc", "xyz", ""),
        ("nospaceshere1", "nospaceshere2", ""),
    ],
)
def test_shared_text_stops_at_a_word_boundary(previous: str, current: str, shared: str) -> None:
    a, b = {"role": "user", "content": previous}, {"role": "user", "content": current}
    assert shared_text(a, b) == shared
    assert shared_text(a, {"role": "tool", "content": current}) == ""
    assert shared_text({"role": "user", "content": None}, b) == ""


def test_self_hosted_templates_count_the_tools_as_their_json_text() -> None:
    messages, _ = session(3)
    counter = ApproxCounter(bytes_per_token=1)
    openai_style = PrefixTracker(counter).observe("m", messages, TOOLS)
    template = PrefixTracker(counter).observe("m", messages, TOOLS, template_tools=True)
    text = "\n".join(json.dumps(tool) for tool in TOOLS)
    # One byte a token: the tools' JSON text itself (litellm counts the text, not its escaping).
    assert template.tools_tokens == len(text.encode())
    assert template.tools_tokens == template_tools_tokens(counter, "m", TOOLS)
    assert template.prompt_tokens - openai_style.prompt_tokens == (
        template.tools_tokens - openai_style.tools_tokens
    )


def test_litellm_counts_template_tools_at_about_twice_its_openai_tool_format() -> None:
    counter = LiteLLMCounter()
    openai_style = counter.tools_tokens("openai/local-model", TOOLS, True)
    template = template_tools_tokens(counter, "openai/local-model", TOOLS)
    assert template > 1.5 * openai_style
