"""The synthetic transcript: deterministic, exact call count, valid, with repeats and parallels."""

from __future__ import annotations

from ctxmw import validate
from ctxmw.messages.pairs import index_tools
from ctxmw.replay.synthetic import synthetic_transcript
from ctxmw.strategies._epochs import repeat_positions


def test_same_seed_same_transcript_other_seed_other() -> None:
    assert synthetic_transcript(50) == synthetic_transcript(50)
    assert synthetic_transcript(50, seed=1) != synthetic_transcript(50)


def test_exact_call_count_valid_with_repeats_and_parallel_calls() -> None:
    msgs = synthetic_transcript(400)
    validate(msgs)
    index = index_tools(msgs)
    assert len(index.calls) == 400
    assert repeat_positions(index.calls)
    assert any(len(members) > 1 for members in index.groups.values())
    assert msgs[-1]["role"] == "assistant"
    assert "tool_calls" not in msgs[-1]
