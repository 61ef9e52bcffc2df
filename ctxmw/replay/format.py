"""What ``ctxmw replay`` prints and plots: one row per strategy list, retention beside cost."""

from __future__ import annotations

import os
from itertools import accumulate
from pathlib import Path
from typing import Any

from ctxmw.replay.caching import CACHING_MODELS
from ctxmw.replay.figures import ReplayResult, StrategyFigures
from ctxmw.replay.optimal import Optimum
from ctxmw.telemetry.plot import pyplot

__all__ = ["format_table", "plot_replay"]

_HEADERS = (
    "strategies",
    "reuse",
    "breaks",
    ">window",
    "total tokens",
    "peak",
    "cost auto",
    "cost breakpoints",
    "cost end_breakpoint",
    "full",
    "compacted",
    "cleared",
)
_LEFT = {0}


def format_table(result: ReplayResult) -> str:
    """The human table: a header line, one row per strategy list, then how to read it."""
    p = result.prices
    head = (
        f"{len(result.transcripts)} transcript(s), {result.calls} call points, "
        f"window {result.window:,} tokens; prices of {p.model} per million tokens: input "
        f"${p.input * 1e6:.2f}, cache read ${p.cache_read * 1e6:.2f}, cache write "
        f"${p.cache_write * 1e6:.2f} ({p.source['cache_write']})"
    )
    rows = [list(_HEADERS)] + [_row(result, s) for s in result.strategies.values()]
    if result.optimal is not None:
        rows.append(_optimal_row(result, result.optimal))
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADERS))]
    lines = [head, ""]
    for row in rows:
        cells = [
            cell.ljust(widths[i]) if i in _LEFT else cell.rjust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    results = next(iter(result.strategies.values())).retention.results
    lines += ["", _legend(results)]
    return "\n".join(lines)


def _row(result: ReplayResult, s: StrategyFigures) -> list[str]:
    ratios, best = result.ratio_to_baseline(s.name), result.ratio_to_optimal(s.name)
    costs = [f"${s.cost[key]:,.2f} {_ratio(ratios[key], best[key])}" for key in CACHING_MODELS]
    kept = s.retention
    return [
        s.name,
        f"{s.reuse_fraction:.3f}",
        str(s.breaks),
        str(s.over_window_calls),
        f"{s.prompt_tokens_total:,}",
        f"{s.prompt_tokens_peak:,}",
        *costs,
        str(kept.full),
        str(kept.compacted),
        str(kept.cleared),
    ]


def _optimal_row(result: ReplayResult, best: Optimum) -> list[str]:
    base = result.strategies[result.baseline].cost
    costs = [
        f"${best.cost[key]:,.2f} {_ratio(best.cost[key] / base[key] if base[key] else None, 1.0)}"
        for key in CACHING_MODELS
    ]
    return [
        "optimal (the limit)",
        "",
        f"{best.moves['auto']} moves",
        "",
        "",
        "",
        *costs,
        "",
        "",
        "",
    ]


def _ratio(value: float | None, optimal: float | None = None) -> str:
    if value is None:
        return "(n/a)"
    if optimal is None:
        return f"({value:.2f}x)"
    return f"({value:.2f}x, {optimal:.2f}x opt)"


def _legend(results: int) -> str:
    return (
        "reuse: share of each previous prompt repeated as this prompt's prefix (token-weighted); "
        "breaks: calls whose previous prompt is not a prefix;\n>window: calls over the window; "
        "cost (x none, x optimal) per caching model: auto = OpenAI-style prefix caching, "
        "breakpoints = marks "
        "placed by cache_breakpoints,\nend_breakpoint = one mark at the end of every prompt; "
        f"full / compacted / cleared: of the {results} tool results, what the model still sees "
        "at the last call\n(full, shortened, only a placeholder; the rest were dropped). A cheap "
        "strategy that keeps few results in full is also blind.\noptimal: the cheapest boundary "
        "schedule of the default's tiers (exact for auto and end_breakpoint, a lower bound for "
        "breakpoints; strategies with other tiers can beat it)."
    )


def plot_replay(result: ReplayResult, out: str | os.PathLike[str]) -> Path:
    """Draw prompt tokens per call and cumulative cost per caching model into a PNG.

    Raises:
        UsageError: matplotlib is not installed (``pip install 'ctxmw[plot]'``).
    """
    plt = pyplot()
    fig, axes = plt.subplots(1 + len(CACHING_MODELS), 1, figsize=(10, 3.2 * 4), sharex=True)
    _draw_tokens(axes[0], result)
    for ax, key in zip(axes[1:], CACHING_MODELS, strict=True):
        _draw_cost(ax, result, key)
    axes[-1].set_xlabel("call point")
    fig.tight_layout()
    path = Path(out)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _draw_tokens(ax: Any, result: ReplayResult) -> None:
    for s in result.strategies.values():
        ax.plot([c.prompt_tokens for c in s.calls], label=s.name, linewidth=1)
    ax.axhline(result.window, color="grey", linestyle="--", linewidth=1, label="window")
    ax.set_ylabel("prompt tokens")
    ax.legend(fontsize="small")


def _draw_cost(ax: Any, result: ReplayResult, key: str) -> None:
    for s in result.strategies.values():
        ax.plot(list(accumulate(c.cost[key] for c in s.calls)), label=s.name, linewidth=1)
    ax.set_ylabel(f"cumulative $ ({key})")
