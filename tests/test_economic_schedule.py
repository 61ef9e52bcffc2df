"""The economic schedule's pure decision (ctxmw/strategies/_economic_schedule.py): sizes, the
cost of one prompt, the step at one call point, the epoch plan of a boundary."""

from __future__ import annotations

import math

from ctxmw.settings import Settings
from ctxmw.strategies._economic_memo import FoldState
from ctxmw.strategies._economic_schedule import Sizes, boundary_plan, prompt_cost, step
from ctxmw.strategies._economics import Economics

S = Settings(economic_full_tool_calls=1, economic_compacted_tool_calls=1, economic_guard=None)


def econ(rule: str = "openai", limit: int = 10**9, guard: float | None = None) -> Economics:
    return Economics(rule, 1.0, 0.1, 1.0, 100, math.inf, limit, guard=guard)


def sizes(calls: int, full: float = 1_000.0, compacted: float = 10.0) -> Sizes:
    """``calls`` completed calls, one message each (results at 1..calls), a 200-token head."""
    return Sizes(
        results_at=list(range(1, calls + 1)),
        other=[200.0] * (calls + 2),
        full=[full * i for i in range(calls + 1)],
        compacted=[compacted * i for i in range(calls + 1)],
        head=200.0,
    )


def test_the_prompt_shows_the_tiers_counted_back_from_the_boundary() -> None:
    s = sizes(5)
    assert s.calls_before(6) == 5
    assert s.prompt(6, 0, S) == 200 + 5 * 1_000  # no boundary: every call full
    # Boundary after call 4: call 5 full (newer), call 4 full, call 3 compacted, 1-2 dropped.
    assert s.prompt(6, 4, S) == 200 + 2 * 1_000 + 10


def test_a_prompt_under_the_minimum_pays_the_input_price_and_reads_nothing() -> None:
    e = econ()
    assert prompt_cost(e, 99, 99) == 99 * e.input
    assert prompt_cost(e, 1_000, 600) == 600 * e.read + 400 * e.write
    assert prompt_cost(e, 1_000, 50) == 1_000 * e.write  # a cached part under the minimum


def test_no_move_until_the_rent_reaches_the_purchase() -> None:
    s, e = sizes(30), econ()
    state = FoldState()
    moved_at = None
    for point in range(2, 32):
        after = step(state, point, s, e, S, ())
        if after.moves > state.moves:
            moved_at = point
            break
        assert after.rent >= state.rent  # the rent only accumulates while staying
        state = after
    assert moved_at is not None
    assert moved_at > 3  # not at the first call that could reclaim something


def test_a_prompt_over_the_limit_moves_at_once() -> None:
    s = sizes(30)
    stay = s.prompt(31, 0, S)
    after = step(FoldState(), 31, s, econ(limit=int(stay) - 1), S, ())
    assert after.moves == 1
    assert after.boundary == 30


def test_a_cold_point_moves_at_once_and_pays_no_rent() -> None:
    s = sizes(30)
    after = step(FoldState(), 31, s, econ(), S, cold={31})
    assert (after.moves, after.boundary, after.rent) == (1, 30, 0.0)


def test_the_guard_holds_a_move_that_would_cost_more_than_none() -> None:
    s = sizes(30)
    # Rent banked far past the purchase, but the running cost already at none's: the guard waits.
    over = FoldState(rent=10**9, spent=10**9, baseline=1.0, sent=1_000.0, plain=1_000.0)
    assert step(over, 31, s, econ(guard=1.05), S, ()).moves == 0
    assert step(over, 31, s, econ(guard=None), S, ()).moves == 1


def test_the_plan_keeps_the_newer_calls_full_then_the_tiers() -> None:
    plan = boundary_plan(n=30, boundary=20, previous=12, moves=3, settings=S)
    assert plan.keep_full == 30 - 20 + S.economic_full_tool_calls
    assert plan.truncate_to == plan.keep_full + S.economic_compacted_tool_calls
