"""``inbox``: deliver the files dropped beside the save_file, once each, as user messages.

Runs after the shortening strategy in the default list, so what it injects is the last thing the
model reads. Each regular file of ``<stem>.inbox/`` (byte order of names; dotfiles, folders and
symlinks skipped) is moved into ``<stem>.inbox_removed/`` and appended as
``{"role": "user", "content": <text>}``. A file named exactly ``abort`` raises
``ctxmw.Aborted`` instead; files after it stay for the next run.

Reported in ``ctx.stats["inbox"]`` (only when a message was delivered):
``{"delivered": [<the message dicts appended>], "files": [<their names in the inbox>]}``, so
the wrapper can persist them (``inbox_persist``) or deliver them again when the provider call
that carried them failed. It is filled even when ``Aborted`` or a cancellation interrupts the
run, so nothing consumed is lost in-process. This strategy never writes the transcript.

Decisions where the specification is silent:

- An unreadable file (it cannot be opened) is logged and left in the inbox, like a file over
  ``inbox_max_bytes``: it is delivered once fixed. A file taken by a concurrent reader first is
  skipped quietly; two readers never both deliver one file.
- A blank file other than ``abort`` is consumed but not shown: an empty user message is
  rejected by several providers.
"""

from __future__ import annotations

from pathlib import Path

from anyio import to_thread

from ctxmw.errors import Aborted
from ctxmw.inbox import inbox_dir, inbox_removed_dir
from ctxmw.inbox._files import ABORT, Skipped, scan, take
from ctxmw.strategies._registry import register_strategy
from ctxmw.types import Message, Messages, StrategyContext

__all__ = ["inbox"]


@register_strategy("inbox")
async def inbox(messages: Messages, ctx: StrategyContext) -> Messages:
    """Append the messages dropped in the save_file's inbox, once each; an 'abort' file stops."""
    if ctx.save_file is None:
        return messages
    folder, removed = inbox_dir(ctx.save_file), inbox_removed_dir(ctx.save_file)
    entries = await to_thread.run_sync(scan, folder)
    delivered: Messages = []
    files: list[str] = []
    try:
        for entry in entries:
            text = await _take(folder, removed, entry.name, ctx)
            if text is None:
                continue
            if entry.name == ABORT:
                raise Aborted(text.strip() or _blank_abort_reason(folder))
            if not text.strip():
                ctx.logger.warning("Inbox file %r was blank; consumed, not shown.", entry.name)
                continue
            delivered.append({"role": "user", "content": text})
            files.append(entry.name)
    finally:
        _report(ctx, delivered, files)
    return [*messages, *delivered] if delivered else messages


async def _take(folder: Path, removed: Path, name: str, ctx: StrategyContext) -> str | None:
    """The text of ``folder/name`` once moved to ``removed``; None if it was skipped."""
    try:
        data = await to_thread.run_sync(take, folder, removed, name, ctx.settings.inbox_max_bytes)
    except Skipped as exc:
        ctx.logger.warning("%s", exc)
        return None
    except FileNotFoundError:
        ctx.logger.debug("Inbox file %r was taken by another reader.", name)
        return None
    except OSError as exc:
        ctx.logger.warning(
            "Could not deliver inbox file %r: %s. It was skipped; the others were delivered.",
            str(folder / name),
            exc,
        )
        return None
    return data.decode("utf-8", errors="replace")


def _blank_abort_reason(folder: Path) -> str:
    return f"The inbox file {str(folder / ABORT)!r} asked the agent to stop (it gave no reason)."


def _report(ctx: StrategyContext, delivered: list[Message], files: list[str]) -> None:
    if not delivered:
        return
    # Extend rather than replace: the strategy may appear twice in one chain.
    stats = ctx.stats.setdefault("inbox", {"delivered": [], "files": []})
    stats["delivered"].extend(delivered)
    stats["files"].extend(files)
