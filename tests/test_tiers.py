"""strategies/_tiers.py: the pairing rule, and that it looks only where a pair can break."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmw.messages import pairs
from ctxmw.strategies import _tiers
from ctxmw.strategies._tiers import Region, keep_pairs
from ctxmw.types import Messages
from tests._incremental import CallCounter, run_chain
from tests.transcripts import adjacent_calls, call, group, transcripts

D, C, F = Region.DROPPED, Region.COMPACTED, Region.FULL


def _every_group(index: pairs.ToolIndex, calls: bytes, results: bytes) -> tuple[bytes, bytes]:
    """The rule applied the plain way: every pair, then every group, whatever the drop edge."""
    c, r = bytearray(calls), bytearray(results)
    for f in range(len(c)):
        if (c[f] == D) != (r[f] == D):
            c[f], r[f] = min(c[f], C), min(r[f], C)
    for members in index.groups.values():
        if not all(f is not None and c[f - 1] == D for f in members):
            for f in members:
                if f is not None and c[f - 1] == D:
                    c[f - 1] = r[f - 1] = C
    return bytes(c), bytes(r)


@st.composite
def _regions(draw: st.DrawFn) -> tuple[Messages, bytes, bytes]:
    messages = draw(transcripts())
    n = len(pairs.index_tools(messages).calls)
    if draw(st.booleans()):  # shorten_tools' shape: the oldest calls dropped, then tiers
        edge = draw(st.integers(0, n))
        calls = bytes([D] * edge) + bytes(
            draw(st.lists(st.sampled_from([F, C]), min_size=n - edge, max_size=n - edge))
        )
        results = bytes([D] * edge) + bytes(
            draw(st.lists(st.sampled_from([F, C]), min_size=n - edge, max_size=n - edge))
        )
    else:  # any regions at all
        calls = bytes(draw(st.lists(st.sampled_from([F, C, D]), min_size=n, max_size=n)))
        results = bytes(draw(st.lists(st.sampled_from([F, C, D]), min_size=n, max_size=n)))
    return messages, calls, results


@settings(deadline=None, max_examples=150)
@given(_regions())
def test_keep_pairs_is_the_rule_applied_to_every_group(case: tuple[Messages, bytes, bytes]) -> None:
    messages, calls, results = case
    index = pairs.index_tools(messages)
    kept_calls, kept_results = keep_pairs(index, calls, results)
    assert (kept_calls, kept_results) == _every_group(index, calls, results)
    for f in range(len(kept_calls)):
        assert (kept_calls[f] == D) == (kept_results[f] == D)
        assert kept_calls[f] <= calls[f]
        assert kept_results[f] <= results[f]
    for members in index.groups.values():
        dropped = {kept_calls[f - 1] == D for f in members if f is not None}
        assert len(dropped) <= 1


def test_a_group_with_one_kept_call_keeps_the_dropped_one_compacted() -> None:
    messages = [
        {"role": "user", "content": "go"},
        *group([call("a", "read", path="a"), call("b", "read", path="b")], ["x", "y"]),
    ]
    index = pairs.index_tools(messages)
    assert keep_pairs(index, bytes([D, F]), bytes([D, F])) == (bytes([C, F]), bytes([C, F]))
    assert keep_pairs(index, bytes([D, D]), bytes([D, D])) == (bytes([D, D]), bytes([D, D]))
    # A call dropped without its result (or the other way round) is compacted with it.
    assert keep_pairs(index, bytes([D, D]), bytes([F, D])) == (bytes([C, C]), bytes([F, C]))


def test_the_pairing_pass_looks_only_at_groups_by_the_drop_edge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    looked = CallCounter(monkeypatch, _tiers, "_keep_whole")
    history = adjacent_calls(300)
    history += group([call("a", "read", path="a"), call("b", "read", path="b")], ["x", "y"])
    run_chain(history, "shorten_tools", {})
    assert 1 <= looked.n <= 3
