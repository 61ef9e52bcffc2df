"""``inbox``: deliver the files dropped beside the save_file, once each, as user messages.

Runs after the shortening strategy in the default list, so what it injects is the last thing the
model reads. Each regular file of ``<save_file>.inbox/`` (byte order of names; dotfiles, folders and
symlinks skipped; at most ``inbox_max_messages`` per call, the rest wait for the next call) is
appended as ``{"role": "user", "content": <text>}`` and moved into ``<save_file>.inbox_removed/``.
An entry named exactly ``abort``, of any kind (a file, folder, FIFO, symlink, an oversize
file), raises ``ctxmw.Aborted`` instead; it is consumed, files after it stay for the next run.

When is a file moved? In a one-off call (``ctx.hold_inbox`` False), at once. In a session
(``hold_inbox`` True) it is only claimed (see :mod:`ctxmw.inbox._claims`): the session moves it
once the round that carried it is committed, and puts it back in the inbox if the call fails,
is cancelled or its stream breaks; if the process dies, the next reader puts it back. So a
consumed note is never lost, in this process or across a crash.

Reported in ``ctx.stats["inbox"]`` (only when a message was delivered):
``{"delivered": [<the message dicts appended>], "files": [<their names in the inbox>]}``, plus
``"claims"`` (the held :class:`~ctxmw.inbox._claims.Claim` of each delivered message, same
order) when ``hold_inbox``. It is filled even when ``Aborted`` or a cancellation interrupts the
run. This strategy never writes the transcript, and never logs a message's content.

Decisions where the specification is silent:

- An unreadable file (it cannot be opened) is logged and left in the inbox, like a file over
  ``inbox_max_bytes`` or with more than one hard link (it may be a file from outside the inbox):
  a fixed file is delivered later. A file another reader or a writer is busy with is skipped
  quietly; two readers never both deliver one file.
- A blank file other than ``abort`` is consumed but not shown: an empty user message is
  rejected by several providers.

Cost per call: one worker-thread trip lists the inbox (putting back a dead reader's claims, then
the settled listing of :func:`~ctxmw.inbox._files.scan_settled`), or none when the caller already
made that listing in a trip of its own (a ``Session`` does, with its lock, before a turn's first
round, handed over as ``StrategyContext.inbox_listing``); each delivered file then costs its
own trips.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiofiles
import anyio
from anyio import to_thread

from ctxmw.errors import Aborted
from ctxmw.inbox import inbox_dir, inbox_removed_dir
from ctxmw.inbox._claims import Claim, move_abort, recover, release, settle, take
from ctxmw.inbox._files import ABORT, FileEntry, Skipped, scan_settled
from ctxmw.strategies._registry import register_strategy
from ctxmw.types import Message, Messages, StrategyContext

__all__ = ["inbox", "list_for_delivery"]


def list_for_delivery(folder: Path) -> list[FileEntry]:
    """Worker thread: put back a dead reader's claims, then list ``folder`` settled."""
    recover(folder)
    return scan_settled(folder)


@register_strategy("inbox")
async def inbox(messages: Messages, ctx: StrategyContext) -> Messages:
    """Append the messages dropped in the save_file's inbox, once each; an 'abort' entry stops."""
    if ctx.save_file is None:
        return messages
    folder, removed = inbox_dir(ctx.save_file), inbox_removed_dir(ctx.save_file)
    listing = ctx.inbox_listing.pop() if ctx.inbox_listing else None
    entries = listing[1] if listing is not None and listing[0] == folder else None
    if entries is None:
        entries = await to_thread.run_sync(list_for_delivery, folder)
    delivered: Messages = []
    files: list[str] = []
    claims: list[Claim] = []
    try:
        for entry in entries:
            if entry.name == ABORT:
                raise Aborted(await _abort_reason(folder, removed, entry, ctx))
            if len(delivered) >= ctx.settings.inbox_max_messages:
                continue  # the rest wait for the next call; an abort after them still stops
            held = claims if ctx.hold_inbox else None
            text = await _take(folder, removed, entry.name, ctx, held)
            if text is None:
                continue
            if not text.strip():
                ctx.logger.warning("Inbox file %r was blank; consumed, not shown.", entry.name)
                continue
            delivered.append({"role": "user", "content": text})
            files.append(entry.name)
    finally:
        _report(ctx, delivered, files, claims)
    return [*messages, *delivered] if delivered else messages


async def _take(
    folder: Path, removed: Path, name: str, ctx: StrategyContext, claims: list[Claim] | None
) -> str | None:
    """The text of ``folder/name``, held in ``claims`` (if given) or moved; None if skipped."""
    held = await _claim(folder, removed, name, ctx)
    if held is None:
        return None
    keep = ctx.settings.inbox_keep_delivered
    try:
        text = (await _read(held, ctx.settings.inbox_max_bytes)).decode("utf-8", errors="replace")
    except BaseException:
        with anyio.CancelScope(shield=True):
            await to_thread.run_sync(release, held)
        raise
    if claims is not None and text.strip():
        claims.append(held)
    else:
        with anyio.CancelScope(shield=True):  # consumed: it must not stay claimed
            await to_thread.run_sync(settle, held, keep)
    return text


async def _claim(folder: Path, removed: Path, name: str, ctx: StrategyContext) -> Claim | None:
    try:
        held = await to_thread.run_sync(take, folder, removed, name, ctx.settings.inbox_max_bytes)
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
    if held is None:
        ctx.logger.debug("Inbox file %r is busy (being written or delivered); skipped.", name)
    return held


async def _read(held: Claim, max_bytes: int) -> bytes:
    async with aiofiles.open(held.fd, "rb", closefd=False) as handle:
        return await handle.read(max_bytes)


async def _abort_reason(folder: Path, removed: Path, entry: FileEntry, ctx: StrategyContext) -> str:
    """Consume the ``abort`` entry and return the reason it gives (or one naming it)."""
    path = folder / ABORT
    if entry.regular and entry.size <= ctx.settings.inbox_max_bytes:
        text = await _take(folder, removed, ABORT, ctx, None)
        if text is not None and text.strip():
            return text.strip()
        if text is not None:
            return f"The inbox file {str(path)!r} asked the agent to stop (it gave no reason)."
    try:
        await to_thread.run_sync(move_abort, folder, removed)
    except OSError as exc:  # it stays, so every call stops until someone removes it
        ctx.logger.warning("Could not move the abort entry %r aside: %s.", str(path), exc)
    return (
        f"The inbox entry {str(path)!r} asked the agent to stop; no reason could be read "
        f"(it is not a plain file within inbox_max_bytes={ctx.settings.inbox_max_bytes})."
    )


def _report(
    ctx: StrategyContext, delivered: list[Message], files: list[str], claims: list[Claim]
) -> None:
    if not delivered:
        return
    # Extend rather than replace: the strategy may appear twice in one chain.
    stats: dict[str, Any] = ctx.stats.setdefault("inbox", {"delivered": [], "files": []})
    stats["delivered"].extend(delivered)
    stats["files"].extend(files)
    if ctx.hold_inbox:
        stats.setdefault("claims", []).extend(claims)
