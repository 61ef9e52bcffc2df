"""shorten_tools_epoch_increment: the acceptance vectors of spec section 5.3."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ctxmw.settings import Settings
from ctxmw.strategies.shorten_tools_epoch_increment import (
    increment_epoch_plan,
    shorten_tools_epoch_increment,
)
from ctxmw.types import Messages, StrategyContext
from tests.transcripts import adjacent_calls, classify, span

Run = Callable[..., Messages]

VECTORS = [
    (50, [], [], span(1, 50)),
    (51, [], span(1, 30), span(31, 51)),
    (130, [], span(1, 90), span(91, 130)),
    (140, [], span(1, 90), span(91, 140)),
    (141, span(1, 20), span(21, 120), span(121, 141)),
    (200, span(1, 50), span(51, 150), span(151, 200)),
    (201, span(1, 60), span(61, 180), span(181, 201)),
    (471, span(1, 290), span(291, 450), span(451, 471)),
]


@pytest.mark.parametrize(("n", "dropped", "compacted", "full"), VECTORS)
def test_acceptance_vectors(
    run: Run, n: int, dropped: list[int], compacted: list[int], full: list[int]
) -> None:
    source = adjacent_calls(n)
    prompt = run(shorten_tools_epoch_increment, source)
    assert classify(source, prompt) == {"dropped": dropped, "compacted": compacted, "full": full}


def test_at_threshold_the_prompt_is_the_input(run: Run) -> None:
    source = adjacent_calls(50)
    assert run(shorten_tools_epoch_increment, source) is source


REPEAT = {155: 30}


def test_repeat_before_it_happens_drops_the_oldest(run: Run) -> None:
    source = adjacent_calls(154, repeat=REPEAT)
    assert classify(source, run(shorten_tools_epoch_increment, source))["dropped"] == span(1, 20)


def test_repeat_grows_epoch_and_compacted_window(run: Run) -> None:
    source = adjacent_calls(155, repeat=REPEAT)
    ctx = StrategyContext(settings=Settings())
    prompt = shorten_tools_epoch_increment(source, ctx)
    assert classify(source, prompt)["dropped"] == []
    stats = ctx.stats["shorten_tools_epoch_increment"]
    assert (stats["size"], stats["truncate_to"] - stats["keep_full"]) == (40, 120)


def test_next_epoch_keeps_the_grown_size(run: Run) -> None:
    source = adjacent_calls(181, repeat=REPEAT)
    ctx = StrategyContext(settings=Settings())
    prompt = shorten_tools_epoch_increment(source, ctx)
    assert classify(source, prompt)["dropped"] == span(1, 40)
    assert ctx.stats["shorten_tools_epoch_increment"]["size"] == 40


def test_latest_repeat_stays_full_after_its_neighbours_are_dropped(run: Run) -> None:
    # Call 60 repeats call 55; by N = 400 both neighbourhoods are long dropped.
    source = adjacent_calls(400, repeat={60: 55})
    regions = classify(source, run(shorten_tools_epoch_increment, source))
    assert 60 in regions["full"]
    assert {55, 59, 61} <= set(regions["dropped"])


def test_repeat_outside_the_nominal_part_belongs_to_the_next_epoch() -> None:
    settings = Settings()
    # Epoch 0 is (50, 70]; a repeat at 71 must not stretch it after the fact.
    plan = increment_epoch_plan(71, [71], settings)
    assert plan is not None
    assert (plan.pinned, plan.size) == (70, 30)


def test_max_size_bounds_growth() -> None:
    settings = Settings(epoch_increment_max_size=25)
    plan = increment_epoch_plan(5000, [], settings)
    assert plan is not None
    assert plan.size == 25


def test_max_size_never_below_epoch_size() -> None:
    plan = increment_epoch_plan(75, [], Settings(epoch_increment_max_size=5))
    assert plan is not None
    assert plan.size == 20


def test_negative_growth_ratio_means_no_growth() -> None:
    plan = increment_epoch_plan(141, [], Settings(epoch_increment_compacted_growth_ratio=-3))
    assert plan is not None
    assert plan.truncate_to - plan.keep_full == 80


def test_max_compacted_never_below_base_window() -> None:
    settings = Settings(epoch_increment_max_compacted_tool_calls=10)
    plan = increment_epoch_plan(141, [], settings)
    assert plan is not None
    assert plan.truncate_to - plan.keep_full == 80


@pytest.mark.parametrize(
    "overrides",
    [{"epoch_size": 0}, {"epoch_full_tool_calls": 0, "epoch_compacted_tool_calls": 0}],
)
def test_disabled_configurations_leave_the_prompt_unchanged(
    run: Run, overrides: dict[str, int]
) -> None:
    source = adjacent_calls(120)
    assert run(shorten_tools_epoch_increment, source, **overrides) is source
