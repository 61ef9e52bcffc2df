"""shorten_tools_epoch: fixed epochs, and repeats that cannot move the prefix mid-epoch."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from ctxmw.strategies.shorten_tools_epoch import shorten_tools_epoch
from ctxmw.types import Messages
from tests.transcripts import adjacent_calls, classify, span

Run = Callable[..., Messages]


@pytest.mark.parametrize(
    ("n", "dropped", "compacted", "full"),
    [
        (50, [], [], span(1, 50)),
        (51, [], span(1, 30), span(31, 51)),
        (70, [], span(1, 30), span(31, 70)),
        (71, [], span(1, 50), span(51, 71)),
        (151, span(1, 50), span(51, 130), span(131, 151)),
        (170, span(1, 50), span(51, 130), span(131, 170)),
    ],
)
def test_fixed_epoch_regions(
    run: Run, n: int, dropped: list[int], compacted: list[int], full: list[int]
) -> None:
    source = adjacent_calls(n)
    prompt = run(shorten_tools_epoch, source)
    assert classify(source, prompt) == {"dropped": dropped, "compacted": compacted, "full": full}


def test_third_occurrence_of_a_repeat_does_not_move_the_prefix_mid_epoch(run: Run) -> None:
    # Call 60 repeats 10, and 135 repeats it again, inside the epoch pinned at 130.
    source = adjacent_calls(140, repeat={60: 10, 135: 10})
    cut = {n: 2 + 2 * n for n in (134, 135)}  # messages holding the first n calls
    before = run(shorten_tools_epoch, source[: cut[134]])
    after = run(shorten_tools_epoch, source[: cut[135]])
    dumps = [json.dumps(m, sort_keys=True) for m in before]
    assert [json.dumps(m, sort_keys=True) for m in after[: len(before)]] == dumps
    assert 60 in classify(source[: cut[135]], after)["full"]


def test_protection_moves_to_the_newest_instance_when_the_epoch_ends(run: Run) -> None:
    source = adjacent_calls(400, repeat={60: 10, 135: 10})
    regions = classify(source, run(shorten_tools_epoch, source))
    assert 135 in regions["full"]
    assert 60 in regions["dropped"]


@pytest.mark.parametrize(
    "overrides",
    [
        {"epoch_size": 0},
        {"epoch_size": -5},
        {"epoch_full_tool_calls": 0, "epoch_compacted_tool_calls": 0},
    ],
)
def test_disabled_configurations_leave_the_prompt_unchanged(
    run: Run, overrides: dict[str, int]
) -> None:
    source = adjacent_calls(120)
    assert run(shorten_tools_epoch, source, **overrides) is source
