"""The inbox files a session holds for the notes it delivered, until their round is committed.

The ``inbox`` strategy only claims a file when a session runs it (``StrategyContext.hold_inbox``;
see :mod:`ctxmw.inbox._claims`). The session then either settles it (the round that carried the
note is in the save_file: the file moves to the removed folder) or releases it (the call failed,
was cancelled or its stream broke: the file goes back into the inbox under its own name, so it is
delivered again in its place). Every step runs shielded: a cancellation cannot leave a file
claimed by a process that has forgotten it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import anyio
from anyio import to_thread

from ctxmw.inbox._claims import Claim, release, settle
from ctxmw.types import Message, StrategyContext

__all__ = ["HeldNotes"]

_Choice = Callable[[Message], bool]


class HeldNotes:
    """The claims of one session, each with the note (message dict) it was read into.

    Args:
        keep: the ``inbox_keep_delivered`` setting, applied when a file is settled.
    """

    def __init__(self, keep: int) -> None:
        self._keep = keep
        # Replaced, never appended to: the empty tuple while none is held.
        self._held: tuple[tuple[Message, Claim], ...] = ()

    def add(self, ctx: StrategyContext) -> None:
        """Take over the claims the ``inbox`` strategy reported for one call."""
        report = ctx.stats.get("inbox", {})
        claims = report.get("claims", [])
        notes = report.get("delivered", [])
        self._held += tuple(
            (n, c) for n, c in zip(notes, claims, strict=False) if isinstance(c, Claim)
        )

    @property
    def held(self) -> int:
        """How many notes are held."""
        return len(self._held)

    async def settle(self) -> None:
        """Every held note was committed: move its file to the removed folder."""
        await self._finish(lambda _: True, settle_them=True)

    def settle_now(self) -> None:
        """Worker thread: :meth:`settle`, for a caller folding it into a trip of its own."""
        done, self._held = self._held, ()
        for _, held in done:
            settle(held, self._keep)

    async def release(self, keep_notes: Sequence[Message] = ()) -> list[Message]:
        """Put back the files of the held notes, except those in ``keep_notes`` (by identity).

        Returns:
            The notes whose files went back into the inbox.
        """
        return await self._finish(lambda note: not any(note is k for k in keep_notes))

    async def release_only(self, notes: Sequence[Message]) -> list[Message]:
        """Put back the files of those of ``notes`` that are held; returns those notes."""
        return await self._finish(lambda note: any(note is n for n in notes))

    async def _finish(self, chosen: _Choice, *, settle_them: bool = False) -> list[Message]:
        done = [(n, c) for n, c in self._held if chosen(n)]
        self._held = tuple((n, c) for n, c in self._held if not chosen(n))
        with anyio.CancelScope(shield=True):
            for _, held in done:
                if settle_them:
                    await to_thread.run_sync(settle, held, self._keep)
                else:
                    await to_thread.run_sync(release, held)
        return [n for n, _ in done]
