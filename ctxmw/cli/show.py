"""``ctxmw show SAVE_FILE``: print a transcript readably (the face of :mod:`ctxmw.cli.view`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ctxmw.cli._args import positive_int
from ctxmw.cli.view import format_transcript
from ctxmw.errors import UsageError
from ctxmw.runtime.transcript import TranscriptFile
from ctxmw.telemetry.files import file_kind, skip_note

__all__ = ["add_show_command"]

if TYPE_CHECKING:
    from ctxmw.cli._args import Adder, SubParsers


def add_show_command(sub: SubParsers, add: Adder) -> None:
    """Add ``show`` to ``sub`` using the CLI's ``add(sub, name, help, fn)``."""
    show = add(sub, "show", "print a transcript (save_file) readably", _cmd_show)
    show.add_argument("save_file", metavar="SAVE_FILE", help="a JSONL transcript")
    show.add_argument("--full", action="store_true", help="do not fold long parts")
    show.add_argument(
        "--width", type=positive_int, default=100, help="characters shown of a folded part"
    )
    show.add_argument(
        "--revisions",
        action="store_true",
        help="print every revision the file holds (a caller that edited its history), oldest first",
    )


def _cmd_show(args: argparse.Namespace) -> int:
    path = Path(args.save_file)
    if not path.is_file():
        raise UsageError(f"no transcript at {str(path)!r}.")
    with path.open("rb") as f:
        note = skip_note(path, file_kind(path, f.read(1 << 16)), "messages")
    if note is not None:
        raise UsageError(note)
    file = TranscriptFile(path)
    if not args.revisions:
        _print(format_transcript(anyio.run(file.load), full=args.full, width=args.width))
        return 0
    revisions = anyio.run(file.revisions)
    every = [*revisions.earlier, revisions.current]
    for n, messages in enumerate(every, start=1):
        label = "current" if n == len(every) else "earlier"
        if len(every) == 1:
            label += ": the only one, the history was never edited"
        print(f"== revision {n} of {len(every)} ({label})")
        _print(format_transcript(messages, full=args.full, width=args.width))
    return 0


def _print(text: str) -> None:
    # A lone surrogate (a non-UTF-8 file name in a tool result) is shown escaped, as \udce9.
    print(text.encode("utf-8", "backslashreplace").decode("utf-8"))
