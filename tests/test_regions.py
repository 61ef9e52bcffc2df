"""The shared renderer: pairing, whole tool groups, and where the compaction notice goes."""

from __future__ import annotations

from collections.abc import Callable

from ctxmw import validate
from ctxmw.messages.pairs import index_tools
from ctxmw.settings import Settings
from ctxmw.strategies._regions import Region, render
from ctxmw.strategies.shorten_tools_epoch import shorten_tools_epoch
from ctxmw.strategies.shorten_tools_epoch_increment import shorten_tools_epoch_increment
from ctxmw.types import Messages
from tests.transcripts import LONG_OUT, adjacent_calls, call, group

Run = Callable[..., Messages]


def _parallel_transcript() -> Messages:
    msgs: Messages = [{"role": "user", "content": "go"}]
    msgs += group([call("a1", x=1), call("a2", x=2)], [LONG_OUT, LONG_OUT])
    msgs += group([call("b1", x=3)], [LONG_OUT])
    return msgs


def test_a_group_is_dropped_only_when_all_its_calls_are() -> None:
    msgs = _parallel_transcript()
    index = index_tools(msgs)
    regions = [Region.DROPPED, Region.FULL, Region.FULL]
    out, counts = render(msgs, index, regions, regions, Settings(), notice=False)
    assert len(out) == len(msgs)
    assert out[2]["content"].startswith("[compacted:")
    assert counts.calls_dropped == 0
    validate(out)


def test_a_call_is_dropped_only_with_its_result() -> None:
    msgs = _parallel_transcript()
    index = index_tools(msgs)
    calls = [Region.DROPPED, Region.DROPPED, Region.FULL]
    results = [Region.DROPPED, Region.FULL, Region.FULL]
    out, _ = render(msgs, index, calls, results, Settings(), notice=False)
    validate(out)
    assert [m.get("tool_call_id") for m in out if m["role"] == "tool"] == ["a1", "a2", "b1"]


def test_whole_group_dropped() -> None:
    msgs = _parallel_transcript()
    index = index_tools(msgs)
    regions = [Region.DROPPED, Region.DROPPED, Region.FULL]
    out, counts = render(msgs, index, regions, regions, Settings(), notice=True)
    assert [m["role"] for m in out] == ["user", "user", "assistant", "tool"]
    assert (counts.calls_dropped, counts.messages_dropped) == (2, 3)
    assert "3 messages were removed" in out[1]["content"]


def test_notice_sits_right_before_the_oldest_remaining_group(run: Run) -> None:
    source = adjacent_calls(141)
    prompt = run(shorten_tools_epoch_increment, source)
    notice = next(i for i, m in enumerate(prompt) if "[Context note" in str(m.get("content")))
    assert prompt[notice + 1]["role"] == "assistant"
    assert prompt[notice + 1]["tool_calls"][0]["id"] == "call_21"
    assert prompt[notice - 1]["role"] == "user"
    validate(prompt)


def test_notice_reports_counts_and_follows_the_setting(run: Run) -> None:
    source = adjacent_calls(141)
    prompt = run(
        shorten_tools_epoch,
        source,
        compaction_notice="C={compacted} D={dropped}",
    )
    texts = [m["content"] for m in prompt if str(m.get("content")).startswith("C=")]
    # N = 141, fixed epochs: pinned 130, keep_full 31, truncate_to 111 -> 30 calls dropped.
    assert texts == ["C=160 D=60"]


def test_no_notice_when_nothing_changed(run: Run) -> None:
    short: Messages = [{"role": "user", "content": "go"}]
    for f in range(60):
        short += group([call(f"c{f}", x=f)], ["ok"])
    assert run(shorten_tools_epoch_increment, short) == short


def test_notice_text_is_identical_within_an_epoch(run: Run) -> None:
    source = adjacent_calls(160)
    notices = set()
    for n in range(141, 161):
        prompt = run(shorten_tools_epoch_increment, source[: 2 + 2 * n])
        notices.add(next(m["content"] for m in prompt if "[Context note" in str(m.get("content"))))
    assert len(notices) == 1
