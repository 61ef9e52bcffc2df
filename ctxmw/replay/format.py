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

_COST_HEADERS = ("strategies", *CACHING_MODELS, "read-backs", "hidden", "recoverable")
_SHAPE_HEADERS = (
    "strategies",
    "reuse",
    "breaks",
    ">window",
    "total tokens",
    "peak",
    "full",
    "compacted",
    "cleared",
)
_LEFT = {0}
WIDTH = 120
"""Every line of the table fits a terminal this wide (strategy lists of 30 characters or less)."""


def format_table(result: ReplayResult) -> str:
    """The human table: what each list costs and hides, then its prompts' shape, then a legend."""
    p = result.prices
    base = result.strategies[result.baseline]
    lines = [
        f"{len(result.transcripts)} transcript(s), {result.calls:,} call points, window "
        f"{result.window:,} tokens, {base.references:,} references",
        f"prices of {p.model} per million tokens: input ${p.input * 1e6:.2f}, cache read "
        f"${p.cache_read * 1e6:.2f}, cache write ${p.cache_write * 1e6:.2f} "
        f"({p.source['cache_write']})",
        "",
    ]
    rows = [list(_COST_HEADERS)] + [_cost_row(result, s) for s in result.strategies.values()]
    if result.optimal is not None:
        rows.append(_optimal_row(result, result.optimal))
    lines += _aligned(rows)
    lines.append("")
    lines += _aligned([list(_SHAPE_HEADERS)] + [_shape_row(s) for s in result.strategies.values()])
    lines += ["", *_legend(base.retention.results)]
    return "\n".join(lines)


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(widths[i]) if i in _LEFT else cell.rjust(widths[i])
            for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]


def _cost_row(result: ReplayResult, s: StrategyFigures) -> list[str]:
    ratios, best = result.ratio_to_baseline(s.name), result.ratio_to_optimal(s.name)
    costs = [_cost(s.cost[key], ratios[key], best[key]) for key in CACHING_MODELS]
    hidden, recoverable = f"{s.hidden_share:.1%}", f"{s.recoverable_share:.1%}"
    return [s.name, *costs, f"{s.readback_calls:,}", hidden, recoverable]


def _shape_row(s: StrategyFigures) -> list[str]:
    kept = s.retention
    return [
        s.name,
        f"{s.reuse_fraction:.3f}",
        str(s.breaks),
        str(s.over_window_calls),
        f"{s.prompt_tokens_total:,}",
        f"{s.prompt_tokens_peak:,}",
        str(kept.full),
        str(kept.compacted),
        str(kept.cleared),
    ]


def _optimal_row(result: ReplayResult, best: Optimum) -> list[str]:
    base = result.strategies[result.baseline].cost
    costs = [
        _cost(best.cost[key], best.cost[key] / base[key] if base[key] else None, 1.0)
        for key in CACHING_MODELS
    ]
    return ["optimal (the limit)", *costs, "", "", ""]


def _cost(dollars: float, ratio: float | None, optimal: float | None) -> str:
    return f"${dollars:,.2f} {_ratio(ratio)} {_ratio(optimal)}"


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _legend(results: int) -> list[str]:
    return [
        "auto, breakpoints, end_breakpoint: the cost under each caching model, read-backs "
        "included, then x none, then x",
        "optimal (n/a: not computed). auto = OpenAI-style prefix caching, breakpoints = marks "
        "placed by cache_breakpoints,",
        "end_breakpoint = one mark at the end of every prompt. optimal: the cheapest boundary "
        "schedule of the default's tiers",
        "and compaction (exact for auto and end_breakpoint, a lower bound for breakpoints; "
        "other tiers can beat it).",
        "read-backs: extra calls the model made to read back (ctxmw_expand) what its next "
        "message needed and the prompt",
        "showed only behind a handle. hidden: of the references (at every call, the strings of "
        "the recorded next message that",
        "first appeared in a tool result), the share the prompt no longer showed; recoverable: "
        "the share only behind a handle.",
        "reuse: share of each previous prompt repeated as this prompt's prefix (token-weighted); "
        "breaks: calls whose previous",
        "prompt is not a prefix; >window: calls over the window; full / compacted / cleared: of "
        f"the {results} tool results, what",
        "the model still sees at the last call (full, shortened, only a placeholder; the rest "
        "were dropped).",
    ]


def plot_replay(result: ReplayResult, out: str | os.PathLike[str]) -> Path:
    """Draw prompt tokens per call and cumulative cost per caching model into a PNG.

    Raises:
        UsageError: matplotlib is not installed (``pip install matplotlib``).
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
        ax.plot(list(accumulate(c.total(key) for c in s.calls)), label=s.name, linewidth=1)
    ax.set_ylabel(f"cumulative $ ({key})")
