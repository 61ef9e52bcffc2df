"""``ctxmw stats [LEDGER...]``: the table (or ``--json``), and ``--plot``, ``--html``, ``--check``,
``--follow``. Without a ledger it reads the default ledger (calls made without a save_file)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctxmw.cli._args import check_folder_of
from ctxmw.errors import UsageError

__all__ = ["add_stats_command"]

Handler = Callable[[argparse.Namespace], int]


def add_stats_command(sub: Any, add: Callable[..., argparse.ArgumentParser]) -> None:
    """Register ``stats`` on the ``ctxmw`` parser."""
    stats = add(sub, "stats", "summarise cache telemetry ledgers", _cmd_stats)
    stats.add_argument(
        "ledgers",
        nargs="*",
        metavar="LEDGER",
        help="*.ledger.jsonl files (default: the default ledger of calls without a save_file)",
    )
    stats.add_argument(
        "--json", action="store_true", help="print the figures (and alerts) as JSON, no table"
    )
    stats.add_argument("--plot", metavar="FILE.png", help="also draw prompt tokens and cache reads")
    stats.add_argument(
        "--html", metavar="FILE", help="also write one self-contained HTML page of the sessions"
    )
    stats.add_argument(
        "--replay",
        metavar="REPLAY.json",
        help="with --html: 'ctxmw replay --json' output; each strategy list's cost is tabled "
        "beside what it hid and its read-backs, and its references are charted",
    )
    stats.add_argument(
        "--check",
        action="store_true",
        help="evaluate the alert rules (the CTXMW_ALERT_* settings); exit 1 if one fires",
    )
    stats.add_argument(
        "--follow", action="store_true", help="keep reading the ledgers as they grow"
    )
    stats.add_argument(
        "--idle",
        type=float,
        metavar="SECONDS",
        help="with --follow: stop after this long without a new call (default: never)",
    )
    stats.add_argument(
        "--poll", type=float, default=1.0, metavar="SECONDS", help="with --follow: poll interval"
    )


def _cmd_stats(args: argparse.Namespace) -> int:
    from ctxmw.telemetry.stats import load_ledgers, plot_ledger

    args.ledgers = args.ledgers or _default_ledgers(waits=args.follow)
    if args.follow:
        return _follow(args)
    for path, option in ((args.plot, "--plot"), (args.html, "--html")):
        if path:
            check_folder_of(path, option)
    records = load_ledgers(args.ledgers, on_skip=_note)
    alerts = _print_summary(records, args.json, args.check)
    if args.plot:
        print(f"plot: {plot_ledger(records, args.plot)}", file=sys.stderr if args.json else None)
    if args.html:
        from ctxmw.telemetry.report import write_html

        page = write_html(records, args.html, _rules(), _replay(args.replay))
        print(f"html: {page}", file=sys.stderr if args.json else None)
    return 1 if args.check and alerts else 0


def _replay(path: str | None) -> Any:
    import json
    from pathlib import Path

    if path is None:
        return None
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--replay {path!r}: cannot read it: {exc.strerror}.") from exc
    except ValueError as exc:
        raise UsageError(
            f"--replay {path!r} is not JSON ({exc}); give the output of ctxmw replay --json."
        ) from exc


def _default_ledgers(waits: bool) -> list[str]:
    """The default ledger's files; with ``--follow`` (``waits``) the file to come, if none yet."""
    from ctxmw.settings import Settings
    from ctxmw.telemetry.default_ledger import DEFAULT_LEDGER_NAME, default_ledgers, state_dir

    settings = Settings()
    found = default_ledgers(settings)
    where = state_dir(settings) / DEFAULT_LEDGER_NAME
    if not found and waits:
        return [str(where)]
    if not found:
        raise UsageError(
            f"No LEDGER given, and the default ledger {str(where)!r} does not exist yet: calls "
            "made without a save_file write it (unless CTXMW_DEFAULT_LEDGER=false); name "
            "*.ledger.jsonl files to read others."
        )
    return [str(path) for path in found]


def _print_summary(records: Sequence[Mapping[str, Any]], as_json: bool, check: bool) -> list[Any]:
    """The table (or the JSON document) and the alerts; returns the alerts."""
    import json

    from ctxmw.telemetry.alerts import evaluate
    from ctxmw.telemetry.stats import format_table, summarise, summary_rows

    stats = summarise([dict(r) for r in records])
    alerts = evaluate(records, _rules())
    if as_json:
        print(json.dumps({"sessions": summary_rows(stats), "alerts": alerts}, indent=2))
        return alerts
    print(format_table(stats))
    for alert in alerts:
        print(_alert_line(alert))
    if check:
        print(f"check: {len(alerts)} alert(s) over {len(records)} calls")
    return alerts


def _note(text: str) -> None:
    print(f"ctxmw stats: {text}", file=sys.stderr)


def _rules() -> Any:
    from ctxmw.settings import Settings
    from ctxmw.telemetry.alerts import AlertRules

    return AlertRules.from_settings(Settings())


def _follow(args: argparse.Namespace) -> int:
    from ctxmw.telemetry.alerts import AlertState
    from ctxmw.telemetry.follow import follow_ledgers
    from ctxmw.telemetry.stats import format_table, summarise

    if args.poll <= 0:
        raise UsageError(f"--poll {args.poll!r} must be a number of seconds above 0.")
    states: dict[str, AlertState] = {}
    fired = 0
    batches = follow_ledgers(args.ledgers, poll_s=args.poll, idle_s=args.idle)
    try:
        for n, batch in enumerate(batches):
            if n == 0:  # what is there already: the table, its alerts only counted
                print(format_table(summarise(batch)), flush=True)
            for record in batch:
                state = states.setdefault(str(record.get("session", "")), AlertState(_rules()))
                alerts = state.observe(record)
                fired += len(alerts)
                if n > 0:
                    print(call_line(record), flush=True)
                    for alert in alerts:
                        print(_alert_line(alert), flush=True)
    except KeyboardInterrupt:
        pass
    return 1 if args.check and fired else 0


def _alert_line(alert: Mapping[str, Any]) -> str:
    return f"ALERT {alert['rule']}: {alert['message']}"


def call_line(record: Mapping[str, Any]) -> str:
    """One followed call: tokens, reported and expected cached fractions, the bust."""
    from ctxmw.telemetry.record import printable

    read = record.get("cache_read_tokens")
    prompt = record.get("prompt_tokens") or 0
    local = record.get("prompt_tokens_local") or 0
    expected = record.get("expected_cached_tokens") or 0
    got = "null" if read is None or not prompt else f"{read / prompt:.1%}"
    want = f"{expected / local:.1%}" if local else "-"
    bust = record.get("bust")
    cause = f" bust={bust.get('cause')}" if isinstance(bust, dict) else ""
    if isinstance(bust, dict) and bust.get("strategy"):
        cause += f":{bust['strategy']}"
    return (
        f"call {printable(str(record.get('session')))} round={record.get('round')} "
        f"model={printable(str(record.get('model')))} "
        f"prompt={prompt} read={'null' if read is None else read} cached={got} "
        f"expected={want}{cause}"
    )
