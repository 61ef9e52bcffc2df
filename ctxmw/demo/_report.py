"""The demo's printed output: a progress bar while it runs, then the comparison table."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from ctxmw.demo._run import DemoRow

__all__ = ["ProgressBar", "expected_differs", "format_rows"]

COLUMNS = (
    "strategies",
    "calls",
    "prompt",
    "peak",
    "read",
    "expected",
    "hit",
    "cost",
    "results",
    "read-backs",
    "hidden",
)
"""Short headers (the footer explains each): the table fits 120 columns. ``expected`` is shown
only when a row's differs from ``read`` (see :func:`expected_differs`)."""


def expected_differs(rows: Sequence[DemoRow]) -> bool:
    """Whether a row's reported cache reads differ from what ctxmw expected from what it sent
    (never with the simulated provider, whose reads ctxmw predicts exactly)."""
    return any(row.cached_reported != row.cached_expected for row in rows)


def format_rows(rows: Sequence[DemoRow]) -> str:
    """The comparison table, one row per strategy list, columns aligned (numbers right)."""
    keep = [expected_differs(rows) or name != "expected" for name in COLUMNS]
    cells = [
        tuple(c for c, k in zip(line, keep, strict=True) if k)
        for line in [COLUMNS, *(_cells(row) for row in rows)]
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in cells
    ]
    return "\n".join(line.rstrip() for line in lines)


def _cells(row: DemoRow) -> tuple[str, ...]:
    cost = "-" if row.cost_usd is None else f"${row.cost_usd:,.2f}"
    results = f"{row.results_full}/{row.results_compacted}/{row.results_cleared}"
    return (
        row.strategies,
        str(row.calls),
        f"{row.prompt_tokens:,}",
        f"{row.peak_prompt_tokens:,}",
        f"{row.cached_reported:,}",
        f"{row.cached_expected:,}",
        f"{row.hit_rate:.1%}",
        cost,
        f"{results}/{row.results_total}",
        str(row.readbacks),
        f"{row.hidden:.1%}",
    )


class ProgressBar:
    """A one-line bar on a terminal; a line per quarter when the output is not a terminal."""

    def __init__(self, stream: TextIO | None = None, width: int = 40) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self._quarter = -1

    def __call__(self, done: int, total: int) -> None:
        total = max(total, done, 1)
        if self.stream.isatty():
            filled = self.width * done // total
            bar = "#" * filled + "-" * (self.width - filled)
            end = "\n" if done >= total else ""
            self.stream.write(f"\r[{bar}] {done}/{total} model calls{end}")
        elif (quarter := 4 * done // total) > self._quarter:
            self._quarter = quarter
            self.stream.write(f"{done}/{total} model calls\n")
        self.stream.flush()
