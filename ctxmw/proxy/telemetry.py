"""The telemetry of a fleet: one recorder per conversation, its state shared through ``State``.

After each successful request the conversation's recorder state (what the next call is
measured against, as :meth:`~ctxmw.telemetry.recorder.CallRecorder.export_state` gives it:
digests, token counts, roles, no message content) is written to the state with a fresh
version; the next request, on any replica, measures against it. A replica that served the
previous request too keeps that state in memory (the saved text, bounded in bytes, least
recently used first) and only reads the version (a few bytes); another replica reads the whole
state once. Every call is measured by a recorder built from that state, never one that held a
request's messages: records do not depend on which replica served a call, and no replica keeps
a prompt between requests.

Only the shared state's reads and writes spend the request's budget (the proxy's
``state_timeout``, shared by all of a request's waits on the state); the measuring itself is
local work, which a loaded replica may take longer over (a first call loads a tokenizer)
without losing its record.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import OrderedDict
from typing import Any

from ctxmw.proxy._guard import StateUnavailable
from ctxmw.proxy._pending import Pending
from ctxmw.settings import Settings
from ctxmw.state import State, key
from ctxmw.telemetry.record import CallRecord
from ctxmw.telemetry.recorder import CallRecorder

__all__ = ["FleetRecorders", "Unsaved"]

_quiet = logging.getLogger("ctxmw.proxy.recorder")
_quiet.propagate = False  # the proxy logs the record itself, once, with its conversation


class Unsaved(StateUnavailable):
    """A call was measured, but its recorder state could not be saved to the shared state in
    time: ``record`` is still the call's record (the next call measures against an older
    state)."""

    def __init__(self, record: CallRecord, cause: BaseException) -> None:
        super().__init__(type(cause).__name__)
        self.record = record


class FleetRecorders:
    """Recorders of the conversations this replica served recently (see the module docstring).

    Args:
        state: the shared state.
        max_bytes: bytes of saved states kept in memory (least recently used go first).
        ttl_s: time to live of a conversation's telemetry state.
    """

    def __init__(
        self, state: State, max_bytes: int = 16 * 1024 * 1024, ttl_s: int = 7 * 24 * 3600
    ) -> None:
        self.state = state
        self._local: OrderedDict[str, tuple[str, str]] = OrderedDict()  # version, saved state
        self._bytes = 0
        self._max = max_bytes
        self._ttl = ttl_s

    @property
    def held_bytes(self) -> int:
        """Bytes of the saved states kept in memory."""
        return self._bytes

    async def record(
        self, pending: Pending, response: object, readback: dict[str, Any] | None = None
    ) -> CallRecord:
        """Measure one finished request against the conversation's previous one, and save.

        ``readback``: the chat wire of an extra call ctxmw made past a reply that only read
        back: its record is marked so, and nothing is saved (as for a library's read-back).

        Raises:
            StateUnavailable: the state could not be read within the request's budget (no
                record).
            Unsaved: the record, measured, but not saved within the request's budget.
        """
        conversation = pending.identity.conversation
        try:
            recorder, round_ = await pending.budget.run(
                lambda: self._recorder(conversation, pending.settings)
            )
        except Exception as exc:
            raise StateUnavailable(type(exc).__name__) from exc
        wire = pending.wire if readback is None else readback
        record = await recorder.record(
            model=str(wire.get("model", "")),
            wire_kwargs=wire,
            transcript=pending.transcript,
            trace=pending.trace,
            stats=pending.stats,
            response=response,
            latency_s=time.perf_counter() - pending.started if pending.started else 0.0,
            round=round_,
            readback=readback is not None,
        )
        if readback is not None:
            return record
        try:
            await pending.budget.run(lambda: self._save(conversation, recorder, round_ + 1))
        except Exception as exc:
            raise Unsaved(record, exc) from exc
        return record

    async def _recorder(self, conversation: str, settings: Settings) -> tuple[CallRecorder, int]:
        version = await self.state.get(key(conversation, "telemetry_version"))
        local = self._forget(conversation)
        raw = local[1] if local is not None and local[0] == version else None
        if raw is None and version:
            raw = await self.state.get(key(conversation, "telemetry"))
        recorder = CallRecorder(conversation, settings=settings, logger=_quiet)
        if raw is None:
            return recorder, 0
        data: dict[str, Any] = json.loads(raw)
        recorder.restore_state(data["recorder"])
        return recorder, int(data["round"])

    async def _save(self, conversation: str, recorder: CallRecorder, round_: int) -> None:
        version = uuid.uuid4().hex
        blob = json.dumps({"round": round_, "recorder": recorder.export_state()})
        # The blob first: a reader that sees the new version always finds its blob.
        await self.state.set(key(conversation, "telemetry"), blob, self._ttl)
        await self.state.set(key(conversation, "telemetry_version"), version, self._ttl)
        self._forget(conversation)
        self._local[conversation] = (version, blob)
        self._bytes += _size(conversation, blob)
        while self._bytes > self._max and self._local:
            self._forget(next(iter(self._local)))

    def _forget(self, conversation: str) -> tuple[str, str] | None:
        local = self._local.pop(conversation, None)
        if local is not None:
            self._bytes -= _size(conversation, local[1])
        return local


def _size(conversation: str, blob: str) -> int:
    # The two strings and the entry around them (a str is about 50 bytes plus its text).
    return len(conversation) + len(blob) + 200
