"""``ctxmw demo`` on the command line: run, then print the table and where the files are."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

import anyio

from ctxmw._files import LEDGER_SUFFIX
from ctxmw.demo._provider import SIMULATED
from ctxmw.demo._report import ProgressBar, expected_differs, format_rows
from ctxmw.demo._run import DEMO_STRATEGIES, SIMULATED_MODEL, DemoRow, check_strategies, run_demo
from ctxmw.errors import UsageError
from ctxmw.telemetry.report import write_html
from ctxmw.telemetry.stats import TABLE_WIDTH, load_ledgers, plot_ledger

__all__ = ["run_demo_command"]


def run_demo_command(args: argparse.Namespace) -> int:
    """Run the demo as the CLI asked; returns the exit code."""
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(
            f"--out {str(out)!r} is a file; the demo writes a folder of transcripts and "
            "ledgers: give a folder (new or existing)."
        )
    check_strategies(args.strategies or DEMO_STRATEGIES)
    simulated = args.model is None and args.api_base is None
    print(_header(simulated, args))
    rows = anyio.run(_run, args, out)
    print()
    print(format_rows(rows))
    print()
    print(_footer(rows, out, simulated))
    return 0


async def _run(args: argparse.Namespace, out: Path) -> list[DemoRow]:
    return await run_demo(
        out,
        calls=args.calls,
        strategies=args.strategies or DEMO_STRATEGIES,
        model=args.model,
        api_base=args.api_base,
        api_key=args.api_key,
        progress=ProgressBar(),
    )


def _header(simulated: bool, args: argparse.Namespace) -> str:
    if not simulated:
        return f"ctxmw demo against {args.model or SIMULATED_MODEL} at {args.api_base or 'its API'}"
    return _wrapped(
        f"ctxmw demo: a scripted coding agent makes about {args.calls} tool calls over the "
        "installed ctxmw package (list, read, grep, run tests, edit; its edits stay in memory), "
        "several at once in some of its steps: one model call per step. When its prompt no "
        "longer shows lines an edit quotes or a line a search found, it reads them back "
        "(ctxmw_expand, where a handle is shown) or runs the read or search again first.",
        f"provider: {SIMULATED.upper()} OpenAI-compatible endpoint on 127.0.0.1, reached through "
        "litellm. It caches prompts like OpenAI (nothing under 1,024 tokens, then 128-token "
        f"blocks), so the costs are at {SIMULATED_MODEL}'s prices from litellm's table (ctxmw "
        "replay prices its --model, by default an Anthropic model: the two price different "
        "providers).",
    )


def _wrapped(*paragraphs: str) -> str:
    return "\n".join(textwrap.fill(p, TABLE_WIDTH, break_on_hyphens=False) for p in paragraphs)


def _footer(rows: list[DemoRow], out: Path, simulated: bool) -> str:
    label = "simulated provider" if simulated else "provider"
    tools = ", ".join(sorted({f"{r.tool_calls:,}" for r in rows}))
    expected = (
        "expected: what ctxmw expected it to read, from what was sent"
        if expected_differs(rows)
        else "on every row exactly what ctxmw expected from what was sent (an expected column "
        "appears when they differ)"
    )
    text = _wrapped(
        "calls: model calls, one per step of the agent "
        f"(its {tools} tool calls, several at once in some steps, the runs again included, and "
        "the final answer), and its read-backs. prompt: tokens sent over the whole session; "
        f"peak: the largest prompt. read: prompt tokens the {label} reported as read from its "
        f"cache, {expected}; hit: read over prompt. results: the tool results the model still "
        "saw at the last call: full / compacted / cleared to a placeholder / all of them. "
        "read-backs: replies that only called ctxmw_expand, each answered with one more model "
        "call. hidden: of the paths, names and numbers the agent's next action took from a tool "
        "result, the share its prompt no longer showed (every call; ctxmw replay measures it "
        "the same way).",
        f"files in {out}/: one transcript (*.jsonl), its ledger (*.jsonl.ledger.jsonl) and its "
        "lock file (*.jsonl.lock, empty when free) per row.",
    )
    records = load_ledgers(sorted(out.glob(f"*{LEDGER_SUFFIX}")))
    hidden = {f"demo:{row.strategies}": row.hidden for row in rows}
    page = write_html(records, out / "report.html", hidden=hidden)
    lines = [text, f"report: {page} (open it in a browser: the sessions side by side)"]
    plot = out / "cache.png"
    try:
        plot_ledger(records, plot)
        lines.append(f"plot: {plot} (prompt tokens and cache reads per call, one panel per row)")
    except UsageError as exc:
        lines.append(f"plot skipped: {exc}")
    return "\n".join(lines)
