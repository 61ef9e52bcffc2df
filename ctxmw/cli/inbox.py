"""``ctxmw inbox send|abort|list``: the command-line face of :mod:`ctxmw.inbox`.

Each command is one call of the library; errors become a sentence on stderr and exit code 1
(the filesystem refused) or 2 (the command was wrong).
"""

from __future__ import annotations

import argparse
import difflib
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ctxmw import inbox
from ctxmw.errors import UsageError

__all__ = ["add_inbox_commands"]

if TYPE_CHECKING:
    from ctxmw.cli._args import Adder, Handler, SubParsers


def add_inbox_commands(sub: SubParsers, add: Adder) -> None:
    """Add ``inbox`` and its subcommands to ``sub`` using the CLI's ``add(sub, name, help, fn)``."""
    group = add(sub, "inbox", "talk to a running agent through its inbox", _cmd_help)
    group.set_defaults(group_parser=group)
    cmds = group.add_subparsers(title="inbox commands", metavar="COMMAND")
    send = add(cmds, "send", "deliver a message before the agent's next model call", _cmd_send)
    send.add_argument("save_file", metavar="SAVE_FILE", help="the agent's transcript path")
    send.add_argument("text", metavar="TEXT", help="the message, or - to read it from stdin")
    send.add_argument("--name", help="a label appended to the file name")
    stop = add(cmds, "abort", "make the agent's next model call raise ctxmw.Aborted", _cmd_abort)
    stop.add_argument("save_file", metavar="SAVE_FILE", help="the agent's transcript path")
    stop.add_argument("reason", metavar="REASON", nargs="?", default="", help="why it stops")
    show = add(cmds, "list", "list pending and delivered messages with their times", _cmd_list)
    show.add_argument("save_file", metavar="SAVE_FILE", help="the agent's transcript path")


def _guarded(handler: Handler) -> Handler:
    """Turn ctxmw's usage errors and the filesystem's refusals into a sentence and an exit code."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except UsageError as exc:
            print(f"ctxmw inbox: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"ctxmw inbox: the filesystem refused: {exc}", file=sys.stderr)
            return 1

    return run


def _cmd_help(args: argparse.Namespace) -> int:
    args.group_parser.print_help(sys.stderr)
    return 2


@_guarded
def _cmd_send(args: argparse.Namespace) -> int:
    text = args.text
    if text == "-":
        text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    path = anyio.run(functools.partial(inbox.deliver, args.save_file, text, name=args.name))
    print(
        f"Queued {path}: pending until the agent's next model call reads it "
        "(ctxmw inbox list shows it as delivered then)."
    )
    _warn_if_unknown(args.save_file)
    return 0


@_guarded
def _cmd_abort(args: argparse.Namespace) -> int:
    path = anyio.run(inbox.abort, args.save_file, args.reason)
    print(f"Abort pending at {path}: the agent's next model call raises ctxmw.Aborted.")
    _warn_if_unknown(args.save_file)
    return 0


def _warn_if_unknown(save_file: str) -> None:
    """A save_file nobody has written yet is often a misspelled one: say so, and what is near."""
    path = Path(save_file)
    if path.exists():
        return
    near = difflib.get_close_matches(path.name, [p.name for p in path.parent.glob("*.jsonl")])
    hint = f" Did you mean {str(path.with_name(near[0]))!r}?" if near else ""
    print(
        f"ctxmw inbox: warning: {save_file!r} does not exist yet, so no agent has written it: "
        f"the message waits for an agent started with exactly this save_file.{hint}",
        file=sys.stderr,
    )


@_guarded
def _cmd_list(args: argparse.Namespace) -> int:
    entries = anyio.run(inbox.list_inbox, args.save_file)
    if not entries:
        print(f"No messages in {inbox.inbox_dir(args.save_file)} or its removed folder.")
    for e in entries:
        state = "delivered" if e.delivered else "pending"
        when = e.written.astimezone().isoformat(timespec="seconds")
        print(f"{state:<9}  {when}  {e.size:>9}  {e.name}")
    return 0
