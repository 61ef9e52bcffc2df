"""One normaliser decides "the same message": what frameworks change when they re-send one."""

from __future__ import annotations

from typing import Any

import pytest

from ctxmw.messages.canonical import message_digest
from ctxmw.messages.normal import normal_key, normal_message, same_message

CALL = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}
STORED: dict[str, Any] = {
    "role": "assistant",
    "content": "",
    "tool_calls": [CALL],
    "function_call": None,
    "provider_specific_fields": {"refusal": None},
    "reasoning_content": "thinking...",
    "refusal": None,
    "annotations": [],
}


@pytest.mark.parametrize(
    "resent",
    [
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "assistant", "tool_calls": [CALL]},
        {"tool_calls": [CALL], "role": "assistant", "content": ""},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{**CALL, "function": {"name": "add", "arguments": '{"a":2}'}}],
        },
        {"role": "assistant", "content": [], "tool_calls": [{**CALL, "index": 0}]},
    ],
)
def test_a_tool_call_message_resent_in_a_framework_spelling_is_the_same(
    resent: dict[str, Any],
) -> None:
    assert same_message(STORED, resent)
    assert normal_key(STORED) == normal_key(resent)


def test_a_litellm_message_object_is_the_same_as_its_dict() -> None:
    from litellm.types.utils import Message

    message = Message(content="", tool_calls=[CALL])
    assert same_message(message, {"role": "assistant", "content": None, "tool_calls": [CALL]})


def test_real_differences_still_differ() -> None:
    other = {**CALL, "function": {"name": "add", "arguments": '{"a": 3}'}}
    assert not same_message(STORED, {"role": "assistant", "tool_calls": [other]})
    assert not same_message({"role": "user", "content": "a"}, {"role": "user", "content": "b"})
    assert not same_message({"role": "user", "content": ""}, {"role": "assistant", "content": ""})
    # Without tool calls an empty content is content, not absence.
    assert not same_message({"role": "assistant", "content": ""}, {"role": "assistant"})


def test_a_one_part_text_list_is_its_text() -> None:
    parts = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    assert same_message(parts, {"role": "user", "content": "hi"})


def test_normal_form_leaves_the_input_untouched() -> None:
    before = repr(STORED)
    normal_message(STORED)
    assert repr(STORED) == before


def test_the_telemetry_digests_use_the_normal_form() -> None:
    resent = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    assert message_digest(STORED) == message_digest(resent)
    assert message_digest(STORED) != message_digest({"role": "user", "content": "x"})
