"""Where the economic schedule moves beside the cheapest schedules, in its own estimate.

Not a test: run ``python benchmarks/economic_schedules.py 240:1 400:0`` (generated sessions of
``bench_economics.py``, ``LENGTH:SEED``). For each caching rule of the schedule (``openai``, and
``breakpoints`` priced as rewriting the head, i.e. an end-of-prompt mark only) it prints the
cost x ``none`` and the call points (indices) of the moves of three schedules, all priced
alike with the schedule's own size estimate (characters / 4) and prices:

- ``schedule``: ``shorten_tools_economic``'s (guard on unless ``--no-guard``);
- ``guarded optimum``: the cheapest schedule whose running cost never exceeds the guard times
  ``none``'s when it moves (the bound the schedule keeps), a dynamic programme over the state
  "boundary after the last move" (the cheapest path to a state is also the one that leaves
  the most room under the bound, so pruning the moves that break it keeps the programme exact);
- ``optimum``: the same without the bound (``ctxmw/replay/optimal.py`` computes the exact one
  with real token counts; this one shares the schedule's estimate, so the three compare).

Seconds per session of a few hundred calls.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from bench_economics import session

from ctxmw.messages.pairs import index_tools
from ctxmw.replay import call_points
from ctxmw.settings import Settings, resolve_settings
from ctxmw.strategies import _economic_schedule as pure
from ctxmw.strategies import shorten_tools_economic as economic
from ctxmw.strategies._economic_memo import FoldState

MODEL = "anthropic/claude-sonnet-4-5"


def schedule(
    sizes: economic.Sizes, points: Sequence[int], econ: economic.Economics, s: Settings
) -> tuple[float, list[int]]:
    """Cost x none and the move indices of the economic schedule."""
    state, moves = FoldState(), []
    for i, point in enumerate(points):
        after = pure.step(state, point, sizes, econ, s, ())
        if after.moves > state.moves:
            moves.append(i)
        state = after
    return state.spent / state.baseline, moves


def cheapest(
    sizes: economic.Sizes,
    points: Sequence[int],
    econ: economic.Economics,
    s: Settings,
    guard: float | None,
) -> tuple[float, list[int]]:
    """Cost x none and the move indices of the cheapest schedule (under the guard's bound)."""
    head = sizes.head if econ.head_read and econ.caches(sizes.head) else 0.0
    states: dict[int, tuple[float, float, tuple[int, ...]]] = {0: (0.0, 0.0, ())}
    baseline, plain_before = 0.0, 0.0
    for i, point in enumerate(points):
        n = sizes.calls_before(point)
        plain = sizes.prompt(point, 0, s)
        baseline += pure.prompt_cost(econ, plain, plain_before)
        plain_before = plain
        moved = sizes.prompt(point, n, s)
        after: dict[int, tuple[float, float, tuple[int, ...]]] = {}
        best: tuple[float, float, tuple[int, ...]] | None = None
        for boundary, (cost, before, path) in states.items():
            stay = sizes.prompt(point, boundary, s)
            after[boundary] = (cost + pure.prompt_cost(econ, stay, before), stay, path)
            if moved < stay:
                move = cost + pure.prompt_cost(econ, moved, min(head, before))
                if best is None or move < best[0]:
                    best = (move, moved, (*path, i))
        within = best is not None and (guard is None or best[0] <= guard * baseline)
        if best is not None and within and (n not in after or best[0] < after[n][0]):
            after[n] = best
        states = after
    cost, _, path = min(states.values())
    return cost / baseline, list(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("sessions", nargs="+", help="generated sessions, LENGTH:SEED")
    parser.add_argument("--no-guard", action="store_true", help="the schedule without its guard")
    args = parser.parse_args(argv)
    overrides = {"economic_guard": None, "economic_guard_automatic": None} if args.no_guard else {}
    for name in args.sessions:
        length, seed = (int(x) for x in name.split(":"))
        messages = session(length, seed)
        s = resolve_settings(overrides)
        sizes = economic.measure(messages, index_tools(messages), s)
        points = call_points(messages)
        for rule in ("openai", "breakpoints"):
            econ = economic.economics(MODEL, resolve_settings({**overrides, "cache_rule": rule}))
            guarded = economic.economics(MODEL, resolve_settings({"cache_rule": rule}))
            rows = {
                "schedule": schedule(sizes, points, econ, s),
                "guarded optimum": cheapest(sizes, points, econ, s, guarded.guard),
                "optimum": cheapest(sizes, points, econ, s, None),
            }
            print(f"{name} {rule}")
            for label, (ratio, moves) in rows.items():
                print(f"  {label:<16} {ratio:.3f} x none  moves at {moves}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
