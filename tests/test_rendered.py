"""strategies/_rendered.py: the render memo, cut back to what the next call can reuse."""

from __future__ import annotations

from typing import Any

from ctxmw.messages import pairs
from ctxmw.strategies._rendered import Rendered
from ctxmw.strategies._tiers import Region
from tests._incremental import growing_rounds, run_chain
from tests.transcripts import adjacent_calls

KEY = ("settings", "model")


def _rendered(messages: list[Any], drop: set[int]) -> Rendered:
    """A render of ``messages`` that drops the positions in ``drop`` and keeps the rest as is."""
    memo = Rendered.empty(KEY)
    memo.inputs = list(messages)
    for i, m in enumerate(messages):
        memo.add(i, m, None if i in drop else m, opens_group=bool(m.get("tool_calls")))
    return memo


def test_add_counts_what_was_dropped_and_compacted_before_each_message() -> None:
    messages = adjacent_calls(3)
    memo = Rendered.empty(KEY)
    for i, m in enumerate(messages):
        new = None if i == 2 else ({**m, "content": "short"} if i == 3 else m)
        memo.add(i, m, new, opens_group=bool(m.get("tool_calls")))
    assert memo.done == len(messages)
    assert list(memo.pos) == [0, *[i + 1 - (i >= 2) for i in range(len(messages))]]
    assert memo.dropped[-1] == 1
    assert memo.compacted[-1] == 1
    notice = {"role": "user", "content": "[notice]"}
    out = memo.body_with(notice)
    assert out[memo.first_group] is notice
    assert out is not memo.body
    assert memo.body_with(None) == memo.body


def test_reuse_cuts_back_to_the_first_changed_message() -> None:
    messages = adjacent_calls(6)
    index = pairs.index_tools(messages)
    regions = bytes([Region.FULL] * len(index.calls))
    memo = _rendered(messages, set())
    memo.calls = memo.results = regions
    edited = [*messages[:7], {**messages[7], "content": "changed"}, *messages[8:]]
    assert memo.reuse(edited, pairs.index_tools(edited), regions, regions, KEY)
    assert memo.done <= 7
    assert memo.body == messages[: memo.done]
    # Another key (settings, model) reuses nothing and leaves the render as it was.
    kept = list(memo.body)
    assert not memo.reuse(edited, pairs.index_tools(edited), regions, regions, ("other",))
    assert memo.body == kept


def test_reuse_shows_this_calls_objects_for_equal_rebuilt_inputs() -> None:
    messages = adjacent_calls(4)
    index = pairs.index_tools(messages)
    regions = bytes([Region.FULL] * len(index.calls))
    memo = _rendered(messages, set())
    memo.calls = memo.results = regions
    rebuilt = [dict(m) for m in messages]
    assert memo.reuse(rebuilt, pairs.index_tools(rebuilt), regions, regions, KEY)
    assert all(a is b for a, b in zip(memo.body, rebuilt[: len(memo.body)], strict=False))


def test_a_kept_render_memo_gives_the_fresh_prompt_after_every_round() -> None:
    memo: dict[str, Any] = {}
    for history in growing_rounds(60, 4):
        warm, _ = run_chain(history, "shorten_tools_epoch", memo)
        assert warm == run_chain(history, "shorten_tools_epoch", {})[0]
    assert isinstance(memo["render:shorten_tools_epoch"], Rendered)
