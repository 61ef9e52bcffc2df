"""``ctxmw stats --html FILE``: one self-contained page that compares sessions.

The page holds its data (one JSON block) and a small script that draws it as inline SVG: it
loads nothing from anywhere, so it opens offline, from an attachment, years later. It shows:

- the comparison table first: per session and model the figures of ``ctxmw stats`` and
  ``--json`` (calls, prompt tokens, cache reads, expected reads, hit rate, cost to the cent),
  with its busts and alerts counted;
- the cumulative cost (or, unpriced, prompt tokens) of every session on one chart;
- per session, prompt tokens with the provider's cache reads (a gap where it reported none:
  not reported is never drawn as 0), and the cached fraction of each prompt, reported beside
  expected (fractions: the provider and ctxmw may count with different tokenizers). The token
  charts share one scale (switchable to a scale per session); ticks fall on round numbers;
- epoch boundaries (dashed) and busts in a strip under each chart, consecutive busts of one
  cause drawn and labelled once (``shorten_tools x47``), so a session that busts every call
  stays readable; the alerts each session fired;
- with replay figures (``ctxmw replay --json`` output that measures references), a table of
  each strategy list's cost under each caching model beside what it hid and recovered and the
  read-backs it made, and a chart of the references each list hid;
- beside cost in the comparison table, what each session hid from the model when the caller
  knows it (``ctxmw demo`` does), and the read-back calls it made (``"readback": true`` lines)
  when its ledger records them: every line has the field, so a session without one shows 0.

The comparison table and the sessions are sorted by cost, cheapest first (unpriced last).

Every string of the data is escaped for the page: ``<``, ``>`` and ``&`` as ``\\u`` escapes in
the JSON block (nothing a session id holds, ``<!--<script>`` or ``</script>``, can end or
re-open a script element), and the script puts text in the page with ``textContent`` only.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

from ctxmw.telemetry.alerts import AlertRules, evaluate
from ctxmw.telemetry.stats import bust_label, summarise, summary_rows

__all__ = [
    "bust_runs",
    "embed_json",
    "references_of",
    "replay_rows",
    "report_data",
    "report_html",
    "write_html",
]

_REFERENCE_KEYS = ("references_shown", "references_recoverable", "references_gone")


def report_data(
    records: Sequence[Mapping[str, Any]],
    rules: AlertRules | None = None,
    replay: Mapping[str, Any] | None = None,
    hidden: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The page's data: the comparison table, one entry per (session, model), the replay's.

    Args:
        records: the ledger records.
        rules: the alert rules (default thresholds without).
        replay: ``ctxmw replay --json`` output, if any.
        hidden: per session, the share of references its prompts hid (the demo measures it).
    """
    alerts = evaluate(records, rules)
    stats = summarise([dict(r) for r in records])
    readbacks = any(_records_readbacks(r) for r in records)
    table, sessions = summary_rows(stats), []
    for row in table:
        mine = [
            r
            for r in records
            if r.get("session") == row["session"] and r.get("model") == row["model"]
        ]
        fired = [a for a in alerts if a["session"] == row["session"]]
        row["alerts"], row["bust_calls"] = len(fired), sum(row["busts"].values())
        row["hidden"] = (hidden or {}).get(row["session"])
        row["readbacks"] = _readbacks(mine) if readbacks else None
        calls = [_call(i, r) for i, r in enumerate(mine, start=1)]
        sessions.append(
            {
                "session": row["session"],
                "model": row["model"],
                "calls": calls,
                "bust_runs": bust_runs(calls),
                "alerts": fired,
            }
        )
    order = sorted(range(len(table)), key=lambda i: _by_cost(table[i]["cost_usd"]))
    return {
        "table": [table[i] for i in order],
        "sessions": [sessions[i] for i in order],
        "alerts": len(alerts),
        "show": {"hidden": hidden is not None, "readbacks": readbacks},
        "references": references_of(replay),
        "replay": replay_rows(replay),
    }


def _records_readbacks(record: Mapping[str, Any]) -> bool:
    """Whether the ledger line says if it was a read-back call (a bool either way)."""
    return isinstance(record.get("readback"), bool)


def _readbacks(records: Sequence[Mapping[str, Any]]) -> int | None:
    """A session's read-back calls; None when none of its lines says (an older ledger)."""
    if not any(_records_readbacks(r) for r in records):
        return None
    return sum(r.get("readback") is True for r in records)


def _by_cost(cost: float | None) -> tuple[bool, float]:
    """Cheapest first, unpriced last."""
    return (cost is None, cost or 0.0)


def report_html(
    records: Sequence[Mapping[str, Any]],
    rules: AlertRules | None = None,
    replay: Mapping[str, Any] | None = None,
    hidden: Mapping[str, float] | None = None,
) -> str:
    """The whole page as one string (the arguments of :func:`report_data`)."""
    data = embed_json(report_data(records, rules, replay, hidden))
    title = html.escape(f"ctxmw cache report: {len(records)} calls")
    page = files("ctxmw.telemetry").joinpath("report.html").read_text(encoding="utf-8")
    # One pass: a value holding "{{TITLE}}" is data, never a place to fill.
    return re.sub(r"\{\{(DATA|TITLE)\}\}", lambda m: data if m[1] == "DATA" else title, page)


def write_html(
    records: Sequence[Mapping[str, Any]],
    out: str | os.PathLike[str],
    rules: AlertRules | None = None,
    replay: Mapping[str, Any] | None = None,
    hidden: Mapping[str, float] | None = None,
) -> Path:
    """Write the page to ``out`` and return its path (the arguments of :func:`report_data`)."""
    path = Path(out)
    path.write_text(report_html(records, rules, replay, hidden), encoding="utf-8")
    return path


def embed_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` (``\\u`` escapes, which
    ``JSON.parse`` reads back unchanged), and no raw line or paragraph separator."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    for char, escaped in _ESCAPES:
        text = text.replace(char, escaped)
    return text


_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def bust_runs(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive busts of one cause as one run ``{start, end, label, count}`` (call numbers).

    One call without a bust between two of the same cause joins the run, so a cause that busts
    every call, or every other one, is one run, not a barcode.
    """
    runs: list[dict[str, Any]] = []
    for call in calls:
        label = call.get("bust")
        if label is None:
            continue
        last = runs[-1] if runs else None
        if last is not None and last["label"] == label and call["n"] - last["end"] <= 2:
            last["end"], last["count"] = call["n"], last["count"] + 1
        else:
            runs.append({"start": call["n"], "end": call["n"], "label": label, "count": 1})
    return runs


def references_of(replay: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Per strategy list, the references a replay measured: shown, recoverable, gone.

    Empty when there is no replay or it measured no references (an older replay's output).
    """
    strategies = replay.get("strategies") if isinstance(replay, Mapping) else None
    if not isinstance(strategies, Mapping):
        return []
    return list(_references(strategies))


def replay_rows(replay: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Per strategy list of a replay: its cost under each caching model, the shares of
    references it hid and left recoverable, and its read-back calls (None where the replay
    does not say); cheapest first under the first caching model."""
    strategies = replay.get("strategies") if isinstance(replay, Mapping) else None
    if not isinstance(strategies, Mapping):
        return []
    rows = [
        {
            "name": str(name),
            "cost": {str(k): _number(v) for k, v in entry["cost"].items()},
            "hidden": _number(entry.get("hidden_share")),
            "recoverable": _number(entry.get("recoverable_share")),
            "readbacks": _number(entry.get("readback_calls")),
        }
        for name, entry in strategies.items()
        if isinstance(entry, Mapping) and isinstance(entry.get("cost"), Mapping) and entry["cost"]
    ]
    return sorted(rows, key=lambda row: _by_cost(next(iter(row["cost"].values()))))


def _references(strategies: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for name, entry in strategies.items():
        if not isinstance(entry, Mapping) or not all(
            isinstance(entry.get(key), int) for key in _REFERENCE_KEYS
        ):
            continue
        yield {
            "name": str(name),
            "shown": entry["references_shown"],
            "recoverable": entry["references_recoverable"],
            "gone": entry["references_gone"],
        }


def _call(n: int, record: Mapping[str, Any]) -> dict[str, Any]:
    bust = record.get("bust")
    return {
        "n": n,
        "round": record.get("round"),
        "prompt": _number(record.get("prompt_tokens")),
        "prompt_local": _number(record.get("prompt_tokens_local")),
        "read": _number(record.get("cache_read_tokens")),
        "expected": _number(record.get("expected_cached_tokens")),
        "write": _number(record.get("cache_write_tokens")),
        "cost": _number(record.get("cost_usd")),
        "epoch": record.get("epoch") if isinstance(record.get("epoch"), int) else None,
        "bust": bust_label(bust) if isinstance(bust, dict) else None,
        "rule": record.get("cache_rule"),
    }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if value == value and abs(value) != float("inf") else None
