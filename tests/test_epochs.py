"""Epoch helpers: repeat detection and protection evaluated up to the epoch boundary."""

from __future__ import annotations

from ctxmw.messages.pairs import index_tools
from ctxmw.strategies._epochs import protected_calls, repeat_positions
from ctxmw.types import Messages
from tests.transcripts import adjacent_calls, call, group


def test_repeats_ignore_ids_and_key_order() -> None:
    msgs: Messages = [{"role": "user", "content": "go"}]
    msgs += group([call("x1", "read", a=1, b=2)], ["r"])
    msgs += group([call("x2", "read", b=2, a=1)], ["r"])
    msgs += group([call("x3", "grep", a=1, b=2)], ["r"])
    assert repeat_positions(index_tools(msgs).calls) == [2]


def test_protection_is_the_latest_instance_up_to_the_boundary() -> None:
    calls = index_tools(adjacent_calls(100, repeat={40: 10, 90: 10})).calls
    assert protected_calls(calls, 80) == {40}
    assert protected_calls(calls, 100) == {90}
    assert protected_calls(calls, 30) == set()
