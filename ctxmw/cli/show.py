"""``ctxmw show SAVE_FILE``: print a transcript readably (the face of :mod:`ctxmw.cli.view`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import anyio

from ctxmw.cli.view import format_transcript
from ctxmw.errors import InvalidTranscriptError
from ctxmw.runtime.transcript import TranscriptFile

__all__ = ["add_show_command"]

Handler: TypeAlias = Callable[[argparse.Namespace], int]
if TYPE_CHECKING:  # argparse's generic is not subscriptable at runtime
    SubParsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
    Adder: TypeAlias = Callable[[SubParsers, str, str, Handler], argparse.ArgumentParser]


def add_show_command(sub: SubParsers, add: Adder) -> None:
    """Add ``show`` to ``sub`` using the CLI's ``add(sub, name, help, fn)``."""
    show = add(sub, "show", "print a transcript (save_file) readably", _cmd_show)
    show.add_argument("save_file", metavar="SAVE_FILE", help="a JSONL transcript")
    show.add_argument("--full", action="store_true", help="do not fold long parts")
    show.add_argument("--width", type=int, default=100, help="characters shown of a folded part")
    show.add_argument(
        "--revisions",
        action="store_true",
        help="print every revision the file holds (a caller that edited its history), oldest first",
    )


def _cmd_show(args: argparse.Namespace) -> int:
    path = Path(args.save_file)
    if not path.is_file():
        print(f"ctxmw show: no transcript at {str(path)!r}.", file=sys.stderr)
        return 1
    file = TranscriptFile(path)
    try:
        if not args.revisions:
            print(format_transcript(anyio.run(file.load), full=args.full, width=args.width))
            return 0
        revisions = anyio.run(file.revisions)
    except InvalidTranscriptError as exc:
        print(f"ctxmw show: {exc}", file=sys.stderr)
        return 1
    every = [*revisions.earlier, revisions.current]
    for n, messages in enumerate(every):
        label = "current" if n == len(every) - 1 else "earlier"
        print(f"== revision {n} of {len(every) - 1} ({label})")
        print(format_transcript(messages, full=args.full, width=args.width))
    return 0
