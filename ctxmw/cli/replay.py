"""``ctxmw replay``: replay transcripts through strategy lists (the face of :mod:`ctxmw.replay`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import anyio

from ctxmw.cli._args import check_folder_of, positive_int, strategies_from
from ctxmw.cli.view import format_transcript
from ctxmw.errors import UsageError
from ctxmw.replay import (
    DEFAULT_MODEL,
    DEFAULT_STRATEGY_LISTS,
    ReplayResult,
    call_points,
    load_transcript,
    prompts,
    replay,
    synthetic_name,
)
from ctxmw.replay.coding import coding_session, swe_run
from ctxmw.replay.format import format_table, plot_replay
from ctxmw.replay.loss import ReferenceIndex
from ctxmw.replay.synthetic import synthetic_transcript
from ctxmw.telemetry.counters import ApproxCounter, LiteLLMCounter
from ctxmw.types import Messages

__all__ = ["add_replay_command", "format_call", "split_strategy_lists"]

if TYPE_CHECKING:
    from ctxmw.cli._args import Adder, SubParsers

_KINDS: dict[str, Callable[[int, int], Messages]] = {
    "words": lambda n, seed: synthetic_transcript(n, seed=seed),
    "swe": lambda n, seed: swe_run(seed, n_calls=n),
    "coding": lambda n, seed: coding_session(n, seed=seed),
}
_HELP = "replay transcripts through strategy lists: tokens, cache reuse, cost, retention"


def add_replay_command(sub: SubParsers, add: Adder) -> None:
    """Add ``replay`` to ``sub`` using the CLI's ``add(sub, name, help, fn)``."""
    cmd = add(sub, "replay", _HELP, _cmd_replay)
    cmd.add_argument(
        "transcripts",
        nargs="*",
        metavar="TRANSCRIPT",
        help="save_files (JSONL), JSON lists of messages, or JSONL with one conversation a line",
    )
    cmd.add_argument(
        "--strategies",
        action="append",
        metavar="LISTS",
        help="a strategy list 'a,b'; several: repeat the option or separate lists with ';' "
        f"(default: {'; '.join(DEFAULT_STRATEGY_LISTS)}); 'none' is always added",
    )
    cmd.add_argument(
        "--synthetic",
        type=positive_int,
        metavar="N",
        help="also replay a synthetic agent run of N calls",
    )
    cmd.add_argument("--seed", type=int, default=0, help="seed of --synthetic (default 0)")
    cmd.add_argument(
        "--kind",
        choices=sorted(_KINDS),
        default="words",
        help="what --synthetic generates: 'words' (sizes and repeats only), 'swe' (a SWE-bench-"
        "like bash agent), 'coding' (a long coding session); swe and coding runs reuse what "
        "their tool results showed, so the hidden column has something to measure",
    )
    cmd.add_argument(
        "--model", default=DEFAULT_MODEL, help=f"litellm model priced (default {DEFAULT_MODEL})"
    )
    cmd.add_argument(
        "--window", type=positive_int, help="context window (default: the model's input)"
    )
    cmd.add_argument(
        "--head-tokens",
        type=int,
        default=0,
        metavar="N",
        help="send a constant head of about N tokens at every call: the system prompt and tool "
        "definitions a real agent sends (Claude Code's are 15-20k tokens), which recorded "
        "transcripts lack (default 0)",
    )
    cmd.add_argument("--json", action="store_true", help="print the result as one JSON object")
    cmd.add_argument("--plot", metavar="FILE.png", help="also draw tokens and cost per call")
    cmd.add_argument(
        "--fast", action="store_true", help="approximate tokens (4 bytes each), no tokenizer"
    )
    cmd.add_argument(
        "--show-call",
        type=positive_int,
        metavar="N",
        help="print the prompt of call N (1 = the first) of one transcript under one strategy "
        "list (default: the default list), and what it shows of the references of that call",
    )
    cmd.add_argument("--full", action="store_true", help="with --show-call: do not fold long parts")


def split_strategy_lists(values: Sequence[str] | None) -> list[str]:
    """``--strategies`` values to strategy lists: each value may hold several, ';'-separated."""
    if not values:
        return list(DEFAULT_STRATEGY_LISTS)
    return [part.strip() for value in values for part in value.split(";") if part.strip()]


def _cmd_replay(args: argparse.Namespace) -> int:
    if not args.transcripts and args.synthetic is None:
        raise UsageError("give TRANSCRIPT files or --synthetic N.")
    if args.head_tokens < 0:
        raise UsageError(f"--head-tokens {args.head_tokens} must be 0 or more (tokens).")
    if args.show_call is not None:
        with strategies_from("--strategies"):
            print(anyio.run(_show_call, args))
        return 0
    if args.plot:
        check_folder_of(args.plot, "--plot")
    with strategies_from("--strategies"):
        result = anyio.run(_run, args)
    print(json.dumps(result.to_json(), indent=2) if args.json else format_table(result))
    if args.plot:
        print(f"plot: {plot_replay(result, args.plot)}", file=sys.stderr if args.json else None)
    return 0


def _note(text: str) -> None:
    print(f"ctxmw replay: {text}", file=sys.stderr)


async def _run(args: argparse.Namespace) -> ReplayResult:
    return await replay(
        await _transcripts(args),
        split_strategy_lists(args.strategies),
        model=args.model,
        window=args.window,
        counter=ApproxCounter() if args.fast else LiteLLMCounter(),
        progress=_note,
        head_tokens=args.head_tokens,
    )


async def _transcripts(args: argparse.Namespace) -> dict[str, Messages]:
    transcripts: dict[str, Messages] = {}
    for path in args.transcripts:
        transcripts.update(await load_transcript(path, on_skip=_note))
    if not transcripts and args.synthetic is None:
        raise UsageError("No transcript to replay: every file given was skipped.")
    if args.synthetic is not None:
        name = synthetic_name(args.synthetic, args.seed)
        if args.kind != "words":
            name = name.replace("synthetic:", f"{args.kind}:", 1)
        transcripts[name] = _KINDS[args.kind](args.synthetic, args.seed)
    return transcripts


async def _show_call(args: argparse.Namespace) -> str:
    transcripts = await _transcripts(args)
    if len(transcripts) != 1:
        raise UsageError(
            f"--show-call needs exactly one transcript; got {len(transcripts)} "
            f"({', '.join(map(repr, transcripts))}). Give one file (or --synthetic N alone)."
        )
    lists = split_strategy_lists(args.strategies) if args.strategies else ["default"]
    if len(lists) != 1:
        raise UsageError(
            f"--show-call shows one strategy list; got {len(lists)} ({'; '.join(lists)}). "
            "Give one --strategies list."
        )
    ((name, messages),) = transcripts.items()
    points = call_points(messages)
    if args.show_call > len(points):
        raise UsageError(
            f"--show-call {args.show_call}: {name!r} has {len(points)} call points; "
            f"pick one from 1 to {len(points)}."
        )
    n, shown = 0, 0
    async for point, prompt in prompts(messages, lists[0], model=args.model):
        n += 1
        if n == args.show_call:
            return format_call(name, lists[0], n, messages, point, prompt, full=args.full)
        # Every prompt before it is computed too (the strategies carry state from call to
        # call): a line at each tenth of the way.
        if (tenth := 10 * n // args.show_call) > shown:
            shown = tenth
            _note(f"--show-call {args.show_call}: {n}/{args.show_call} prompts computed")
    raise AssertionError("unreachable: the call number was checked against the call points")


def format_call(
    name: str,
    strategies: str,
    number: int,
    messages: Messages,
    point: int,
    prompt: Messages,
    *,
    full: bool = False,
) -> str:
    """One prompt readably (``ctxmw replay --show-call N``), then what it shows of the call's
    references: each hidden one with the tool result it came from."""
    loss = ReferenceIndex(messages).measure(point, prompt)
    lines = [
        f"{name}: call {number} (the assistant message at index {point}), strategies "
        f"{strategies!r}: {len(prompt)} messages sent for the {point} recorded before it",
        "",
        format_transcript(prompt, full=full),
        "",
        f"references: {loss.references}, shown {loss.shown}, recoverable {loss.recoverable}, "
        f"gone {loss.gone}",
    ]
    lines += [
        f"  {'recoverable' if item.recoverable else 'gone'}: {item.text!r} (first in the tool "
        f"result at index {item.source}, {item.source_shown} in this prompt)"
        for item in loss.lost
    ]
    return "\n".join(lines)
