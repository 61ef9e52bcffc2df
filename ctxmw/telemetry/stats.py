"""Summaries of ledgers: what ``ctxmw stats`` prints and plots.

Reading is synchronous: this serves the command line and notebooks, never the agent's loop.
"""

from __future__ import annotations

import json
import logging
import math
import os
import textwrap
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxmw._files import Beside
from ctxmw.errors import UsageError
from ctxmw.telemetry.files import file_kind, skip_note
from ctxmw.telemetry.plot import pyplot
from ctxmw.telemetry.record import printable

__all__ = [
    "TABLE_WIDTH",
    "SessionStats",
    "bust_label",
    "expected_on_provider_scale",
    "format_table",
    "load_ledgers",
    "money",
    "plot_ledger",
    "short",
    "summarise",
    "summary_rows",
]

TABLE_WIDTH = 120
"""Terminal tables fit this many columns: long session ids and model names are shortened in the
middle (``…``), bust lists wrapped."""

logger = logging.getLogger("ctxmw")


@dataclass(slots=True)
class SessionStats:
    """Totals of one session and model.

    Attributes:
        session: the session id.
        model: the model name.
        calls: records counted.
        prompt_tokens: provider-reported prompt tokens.
        cache_read_tokens: provider-reported cache reads, summed over the calls that reported
            them; None when no call did (not reported is never 0).
        expected_cached_tokens: cache reads the caching rule expected.
        cost_usd: summed cost of the priced calls (None when no call was priced).
        busts: how many busts each cause had (``"strategy:<name>"`` for strategies).
        reported_calls: calls whose provider reported cache reads.
        reported_prompt_tokens: prompt tokens of those calls (the hit rate's denominator).
    """

    session: str
    model: str
    calls: int = 0
    prompt_tokens: int = 0
    cache_read_tokens: int | None = None
    expected_cached_tokens: int = 0
    cost_usd: float | None = None
    busts: Counter[str] = field(default_factory=Counter)
    reported_calls: int = 0
    reported_prompt_tokens: int = 0

    @property
    def hit_rate(self) -> float | None:
        """Cache reads over the prompt tokens of the calls that reported them (sum over sum).

        None when no call reported cache reads, or they had no prompt tokens.
        """
        if self.cache_read_tokens is None or not self.reported_prompt_tokens:
            return None
        return self.cache_read_tokens / self.reported_prompt_tokens

    def add(self, record: dict[str, Any]) -> None:
        """Count one ledger record."""
        self.calls += 1
        prompt = int(record.get("prompt_tokens") or 0)
        self.prompt_tokens += prompt
        read = record.get("cache_read_tokens")
        if isinstance(read, int | float) and not isinstance(read, bool):
            self.cache_read_tokens = (self.cache_read_tokens or 0) + int(read)
            self.reported_calls += 1
            self.reported_prompt_tokens += prompt
        self.expected_cached_tokens += int(record.get("expected_cached_tokens") or 0)
        cost = record.get("cost_usd")
        if isinstance(cost, int | float):
            self.cost_usd = (self.cost_usd or 0.0) + float(cost)
        bust = record.get("bust")
        if isinstance(bust, dict):
            self.busts[bust_label(bust)] += 1


def load_ledgers(
    paths: Iterable[str | os.PathLike[str]], *, on_skip: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Every record of the given ledger files, in file order; a torn or blank line is skipped.

    A file that holds messages (a transcript, which ``runs/*.jsonl`` also matches) is skipped
    with a one-line note passed to ``on_skip`` (default: a warning on the ``ctxmw`` logger).

    Raises:
        UsageError: a file does not exist or cannot be read, or every file given holds messages
            (the message names the ledger beside the first one).
    """
    records: list[dict[str, Any]] = []
    given, skipped = list(map(Path, paths)), []
    for path in given:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"Cannot read ledger {str(path)!r}: {exc.strerror}.") from exc
        note = skip_note(path, file_kind(path, data[: 1 << 16]), "ledger")
        if note is not None:
            (on_skip or logger.warning)(note)
            skipped.append(path)
            continue
        records.extend(_parse(data.decode("utf-8", errors="replace")))
    if given and len(skipped) == len(given):
        first = skipped[0]
        raise UsageError(
            f"No ledger to read: {str(first)!r} holds messages (a transcript), as does every "
            "file given. ctxmw stats reads the telemetry ledgers (*.ledger.jsonl): a save_file's "
            f"is beside it, here {str(Beside.of(first).ledger)!r}."
        )
    return records


def summarise(records: Iterable[dict[str, Any]]) -> list[SessionStats]:
    """One :class:`SessionStats` per (session, model), in first-seen order."""
    table: dict[tuple[str, str], SessionStats] = {}
    for record in records:
        key = (str(record.get("session", "")), str(record.get("model", "")))
        table.setdefault(key, SessionStats(*key)).add(record)
    return list(table.values())


def summary_rows(stats: Sequence[SessionStats]) -> list[dict[str, Any]]:
    """The table's figures as JSON-ready rows: what ``ctxmw stats --json`` prints and the HTML
    report's comparison table shows (money in USD, unrounded; ``None`` where not reported)."""
    return [
        {
            "session": s.session,
            "model": s.model,
            "calls": s.calls,
            "prompt_tokens": s.prompt_tokens,
            "cache_read_tokens": s.cache_read_tokens,
            "expected_cached_tokens": s.expected_cached_tokens,
            "hit_rate": s.hit_rate,
            "cost_usd": s.cost_usd,
            "reported_calls": s.reported_calls,
            "busts": dict(s.busts.most_common()),
        }
        for s in stats
    ]


def format_table(stats: Sequence[SessionStats], width: int = TABLE_WIDTH) -> str:
    """A plain-text table of ``stats`` in ``width`` columns, then each session's busts."""
    head = ("session", "model", "calls", "prompt", "read", "expected", "hit", "cost_usd")
    rows = [head, *(_row(s) for s in stats)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    widths[0], widths[1] = _fit(widths[0], widths[1], width - sum(widths[2:]) - 2 * 7)
    lines = [
        "  ".join(_cell(c, w, i) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        for row in rows
    ]
    for s in stats:
        if s.busts:
            causes = ", ".join(f"{label} x{n}" for label, n in s.busts.most_common())
            text = f"busts {printable(s.session)} {printable(s.model)}: {causes}"
            lines += textwrap.wrap(text, width, subsequent_indent="  ", break_on_hyphens=False)
    return "\n".join(line.rstrip() for line in lines)


def short(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: its start and its end, ``…`` between."""
    if len(text) <= width:
        return text
    end = (width - 1) * 3 // 5  # the end tells most apart: a file name, a process tag
    return text[: width - 1 - end] + "…" + text[len(text) - end :]


def _fit(session: int, model: int, room: int) -> tuple[int, int]:
    if session + model + 2 <= room:
        return session, model
    model = min(model, max(16, room // 3))
    return max(16, room - model - 2), model


def _cell(text: str, width: int, column: int) -> str:
    text = short(text, width) if column < 2 else text
    return text.ljust(width) if column < 2 else text.rjust(width)


def plot_ledger(records: Sequence[dict[str, Any]], out: str | os.PathLike[str]) -> Path:
    """Draw prompt tokens and cache reads per call (one panel per session) into a PNG.

    Raises:
        UsageError: matplotlib is not installed (``pip install matplotlib``).
    """
    plt = pyplot()
    sessions = summarise(records)
    fig, axes = plt.subplots(len(sessions) or 1, 1, figsize=(10, 3.2 * max(len(sessions), 1)))
    for ax, s in zip(list(getattr(axes, "flat", [axes])), sessions, strict=False):
        mine = [r for r in records if r.get("session") == s.session and r.get("model") == s.model]
        _draw(ax, mine, f"{s.session} ({s.model})")
    fig.tight_layout()
    path = Path(out)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _draw(ax: Any, records: Sequence[dict[str, Any]], title: str) -> None:
    x = range(1, len(records) + 1)
    ax.plot(x, [r.get("prompt_tokens", 0) for r in records], label="prompt tokens")
    # Not reported is a gap, never 0; the expectation is drawn as the same fraction of the
    # provider's prompt, since both sides may count with different tokenizers.
    reads = [_nan(r.get("cache_read_tokens")) for r in records]
    ax.plot(x, reads, label="cache reads (provider)")
    ax.plot(x, [expected_on_provider_scale(r) for r in records], ":", label="expected reads")
    busts = [i for i, r in zip(x, records, strict=True) if r.get("bust")]
    for i in busts:
        ax.axvline(i, color="grey", alpha=0.3, linewidth=0.8)
    ax.set_title(title)
    ax.set_xlabel("call")
    ax.set_ylabel("tokens")
    ax.legend(loc="upper left")


def expected_on_provider_scale(record: dict[str, Any]) -> float:
    """The expected reads as the same fraction of the provider's prompt as of ctxmw's count."""
    local = record.get("prompt_tokens_local") or 0
    expected = record.get("expected_cached_tokens") or 0
    prompt = record.get("prompt_tokens") or 0
    return float(expected) * prompt / local if local else float(expected)


def _nan(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def _row(s: SessionStats) -> tuple[str, ...]:
    return (
        printable(s.session),
        printable(s.model),
        f"{s.calls:,}",
        f"{s.prompt_tokens:,}",
        "null" if s.cache_read_tokens is None else f"{s.cache_read_tokens:,}",
        f"{s.expected_cached_tokens:,}",
        "null" if s.hit_rate is None else f"{s.hit_rate:.1%}",
        money(s.cost_usd),
    )


def money(usd: float | None) -> str:
    """Dollars to the cent (``-`` when not priced, ``<0.01`` for a fraction of a cent)."""
    if usd is None:
        return "-"
    return "<0.01" if 0 < usd < 0.005 else f"{usd:,.2f}"


def bust_label(bust: dict[str, Any]) -> str:
    cause = str(bust.get("cause", "?"))
    strategy = bust.get("strategy")
    return f"{cause}:{strategy}" if strategy else cause


def _parse(text: str) -> Iterable[dict[str, Any]]:
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line from a crash: the other records still count
        if isinstance(record, dict):
            yield record
