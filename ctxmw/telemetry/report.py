"""``ctxmw stats --html FILE``: one self-contained page to look at a ledger.

The page holds its data (one JSON block) and a small script that draws it as inline SVG: it
loads nothing from anywhere, so it opens offline, from an attachment, years later. Per session:

- prompt tokens per call, with the provider's cache reads (a gap where it reported none: not
  reported is never drawn as 0);
- the cached fraction of each prompt, reported (reads over the provider's prompt tokens) beside
  expected (ctxmw's expectation over its own count): fractions, because the provider and ctxmw
  may count with different tokenizers;
- cost per call;
- epoch boundaries (dashed) and busts (red, labelled with their cause) on every chart, and the
  alerts the session fired (the rules of :mod:`ctxmw.telemetry.alerts`).
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping, Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

from ctxmw.telemetry.alerts import AlertRules, evaluate
from ctxmw.telemetry.stats import bust_label, summarise

__all__ = ["report_data", "report_html", "write_html"]


def report_data(
    records: Sequence[Mapping[str, Any]], rules: AlertRules | None = None
) -> dict[str, Any]:
    """The page's data: one entry per (session, model), its calls, totals and alerts."""
    alerts = evaluate(records, rules)
    sessions = []
    for stats in summarise([dict(r) for r in records]):
        mine = [
            r
            for r in records
            if r.get("session") == stats.session and r.get("model") == stats.model
        ]
        sessions.append(
            {
                "session": stats.session,
                "model": stats.model,
                "calls": [_call(i, r) for i, r in enumerate(mine, start=1)],
                "hit_rate": stats.hit_rate,
                "reported_calls": stats.reported_calls,
                "prompt_tokens": stats.prompt_tokens,
                "cost_usd": stats.cost_usd,
                "alerts": [a for a in alerts if a["session"] == stats.session],
            }
        )
    return {"sessions": sessions, "alerts": len(alerts)}


def report_html(records: Sequence[Mapping[str, Any]], rules: AlertRules | None = None) -> str:
    """The whole page as one string."""
    data = json.dumps(report_data(records, rules), ensure_ascii=False, allow_nan=False)
    page = files("ctxmw.telemetry").joinpath("report.html").read_text(encoding="utf-8")
    # "</" never appears inside the data block, so no value can close the script element.
    return page.replace("{{DATA}}", data.replace("</", "<\\/")).replace(
        "{{TITLE}}", html.escape(f"ctxmw cache report: {len(records)} calls")
    )


def write_html(
    records: Sequence[Mapping[str, Any]],
    out: str | os.PathLike[str],
    rules: AlertRules | None = None,
) -> Path:
    """Write the page to ``out`` and return its path."""
    path = Path(out)
    path.write_text(report_html(records, rules), encoding="utf-8")
    return path


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
