"""The per-call record and its sinks: the ``"ctxmw"`` logger, user hooks, the JSONL ledger.

The ledger is a public, stable format: one JSON object per line with exactly the fields of
:class:`CallRecord` (runtime spec section 3). It holds counts and digests, never message content.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import anyio

from ctxmw._files import Beside, private_dirs, write_all
from ctxmw.telemetry.alerts import Alert
from ctxmw.telemetry.bust import Bust
from ctxmw.telemetry.marks import CacheMark

__all__ = [
    "CallHook",
    "CallRecord",
    "LedgerWriter",
    "deliver",
    "ledger_line",
    "ledger_path",
    "log_record",
    "printable",
]

CallHook = Callable[["CallRecord"], "Awaitable[None] | None"]
"""An ``on_call`` hook: called with each record; sync or async."""


@dataclass(frozen=True, slots=True)
class CallRecord:
    """What one model call cost and how much of its prompt the provider's cache served.

    Attributes:
        ts: ISO-8601 UTC time the call finished.
        session: the session id (the save_file, or an explicit id).
        call: the call's number in its session, from 1 (every call the session's recorder
            measured, summaries included).
        round: the round of ctxmw's tool loop the call belongs to (0 for a call without
            Python tools: each stateless call is its own round 0; ``call`` tells them apart).
        model: the litellm model name as called.
        provider: litellm's provider for the model ('' when unknown).
        cache_rule: the concrete caching rule applied (never ``auto``).
        strategies: names of the strategies applied, in order.
        messages_in: messages in the transcript before the strategies.
        messages_out: messages sent.
        calls_compacted: tool calls shown compacted (summed over the strategies' stats).
        calls_dropped: tool calls left out.
        epoch: the epoch strategy's current epoch (None when none ran or it changed nothing).
        prompt_tokens_local: local token count of the payload sent.
        prefix_tokens_local: tokens of the common prefix with the session's previous call.
        expected_cached_tokens: the prefix passed through the caching rule.
        prompt_tokens: provider-reported prompt tokens (local count when not reported).
        cache_read_tokens: provider-reported cache reads; None (``null``) when the provider
            reported none: not reported is never 0.
        cache_write_tokens: provider-reported cache writes; None when not reported.
        completion_tokens: provider-reported completion tokens.
        usage_estimated: the provider reported no usage; token figures are estimates.
        cost_usd: ``litellm.completion_cost`` (None when litellm cannot price the model).
        latency_s: wall-clock seconds of the call.
        bust: None, or what broke the prefix: ``{"cause", "strategy", "message_index"}``.
        payload_digest: hex digest of the canonical payload (tools + messages).
        budget: tokens per layer of the payload against the model's input window, with
            utilisation and band (see :func:`ctxmw.budget`); None when not measured.
        kind: ``"agent"`` for the agent's own calls, ``"summary"`` for a strategy's call
            (``summarize``) made through the session.
        cache_marks: the ``cache_control`` marks the payload carried, in order, as
            ``{"index": i, "ttl": "5m" | "1h"}`` (``index`` -1 for the tools list); None when
            the payload carried none.
        prompt_cache_key: the ``prompt_cache_key`` the call sent (None when none was sent).
        alerts: the alert rules this call made fire (see :mod:`ctxmw.telemetry.alerts`).
        readback: ctxmw made this call itself, to go on past a reply that only read back
            (``ctxmw_expand``): one more call at the same call point, its prompt the previous
            call's plus that reply and the answers.
    """

    ts: str
    session: str
    call: int
    round: int
    model: str
    provider: str
    cache_rule: str
    strategies: tuple[str, ...]
    messages_in: int
    messages_out: int
    calls_compacted: int
    calls_dropped: int
    epoch: int | None
    prompt_tokens_local: int
    prefix_tokens_local: int
    expected_cached_tokens: int
    prompt_tokens: int
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    completion_tokens: int
    usage_estimated: bool
    cost_usd: float | None
    latency_s: float
    bust: Bust | None
    payload_digest: str
    budget: dict[str, Any] | None = None
    kind: str = "agent"
    cache_marks: tuple[CacheMark, ...] | None = None
    prompt_cache_key: str | None = None
    alerts: tuple[Alert, ...] = ()
    readback: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The ledger object (JSON-ready: tuples become lists)."""
        # What dataclasses.asdict gives (nested containers copied), without its per-value
        # dispatch: every other field is a str, a number, a bool or None.
        data = {name: getattr(self, name) for name in _FIELDS}
        data["strategies"] = list(self.strategies)
        data["bust"] = _copied(self.bust)
        data["budget"] = _copied(self.budget)
        data["cache_marks"] = None if self.cache_marks is None else list(self.cache_marks)
        data["alerts"] = list(self.alerts)
        return data

    def to_json(self) -> str:
        """One ledger line, without the newline."""
        return _dumps(self.to_dict())


def ledger_line(data: Mapping[str, Any]) -> bytes:
    """The ledger line of a record's :meth:`CallRecord.to_dict` data, newline included."""
    return (_dumps(data) + "\n").encode()


def _dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


_FIELDS = tuple(f.name for f in fields(CallRecord))


def _copied(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_copied(item) for item in value)
    return value


def ledger_path(save_file: str | os.PathLike[str]) -> Path:
    """The ledger beside a save_file: ``dir/agent.jsonl`` -> ``dir/agent.jsonl.ledger.jsonl``
    (the whole file name, then ``.ledger.jsonl``)."""
    return Beside.of(save_file).ledger


def printable(text: str) -> str:
    """``text`` safe for a log line or a terminal: each character that is not printable (a
    control character, an escape sequence's start, a line break, a lone surrogate) written as
    its Python escape (``\\x1b``, ``\\n``, ``\\ud800``); printable text, any script, as it is."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def log_record(logger: logging.Logger, record: CallRecord, hit_rate: float | None = None) -> None:
    """One INFO line: the call (``readback`` after its number when ctxmw made it past a reply
    that only read back), reported against expected cache reads, the session's hit rate so far
    and the bust if any; then one WARNING line per alert the call fired.

    ``~`` after the prompt marks token figures the provider did not report (a local count:
    no usage, or a ``mock_response``'s made-up one); ``read=null``: no cache reads reported.
    """
    bust = record.bust
    cause = ""
    if bust is not None:
        cause = f" bust={bust['cause']}"
        if bust["strategy"]:
            cause += f":{bust['strategy']}"
        if bust["message_index"] is not None:
            cause += f"@{bust['message_index']}"
    logger.info(
        "ctxmw call %d%s session=%s model=%s prompt=%d%s read=%s expected=%d prefix_local=%d "
        "hit=%s so far rule=%s%s",
        record.call,
        (f" round {record.round}" if record.round else "")
        + (" readback" if record.readback else ""),
        printable(record.session),
        printable(record.model),
        record.prompt_tokens,
        "~" if record.usage_estimated else "",
        "null" if record.cache_read_tokens is None else record.cache_read_tokens,
        record.expected_cached_tokens,
        record.prefix_tokens_local,
        "null" if hit_rate is None else f"{hit_rate:.1%}",
        record.cache_rule,
        cause,
    )
    for alert in record.alerts:
        logger.warning("ctxmw alert %s %s", alert["rule"], alert["message"])


async def deliver(hooks: Iterable[CallHook], record: CallRecord, logger: logging.Logger) -> None:
    """Call each hook; a failing hook is logged and never breaks the agent's call."""
    for hook in hooks:
        try:
            result = hook(record)
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception("ctxmw on_call hook %r failed; the call itself succeeded", hook)


class LedgerWriter:
    """Appends records to one ledger file, one line each, serialised by a lock.

    The file is created with owner-only permissions whatever the umask (like the transcript it
    sits beside). A torn last line (a writer killed mid-append) is ended with a newline before
    the next record, so it stays one unreadable line that readers skip instead of swallowing
    the record appended after it.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        # The lock is made by the first write of its own: a session's lines go out in the
        # runtime's trip (append_now), which needs none.
        self._path = str(Path(path))
        self._lock: anyio.Lock | None = None

    @property
    def path(self) -> Path:
        """The ledger file."""
        return Path(self._path)

    async def write(self, record: CallRecord) -> None:
        """Append one record: one ``write`` of the whole line, after a torn tail's newline.

        The whole append (open, look at the last byte, write, close) is one trip to a worker
        thread: a trip per file operation made each call wait for the thread pool several
        times, which a thousand concurrent sessions feel.
        """
        await self.write_line(ledger_line(record.to_dict()))

    async def write_line(self, data: bytes) -> None:
        """Append one line built by :func:`ledger_line` (see :meth:`write`)."""
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            await anyio.to_thread.run_sync(self.append_now, data)

    def append_now(self, data: bytes) -> None:
        """Worker thread: append whole :func:`ledger_line` lines, for a caller folding the
        ledger into a trip of its own (the runtime's after-call write).

        A ledger that cannot be written never fails the call: the first failure in a folder
        logs one WARNING naming the file, the reason and :meth:`advice`; later ones are silent.
        """
        try:
            self._append(data)
        except OSError as exc:
            _unwritable(self.path, exc, self.advice())

    def advice(self) -> str:
        """What to do when the ledger cannot be written (the end of its one warning)."""
        return "Free disk space or fix the folder's permissions; the save_file is not affected."

    def _append(self, data: bytes) -> None:
        path = self.path
        private_dirs(path.parent)
        with open(path, "a+b", buffering=0, opener=_owner_only) as handle:
            size = handle.seek(0, os.SEEK_END)
            if size and handle.seek(size - 1) >= 0 and handle.read(1) != b"\n":
                data = b"\n" + data
            write_all(handle.fileno(), data)  # a full disk raises, never loops


_warned: set[Path] = set()  # folders whose ledger failed, warned about once per process
_warned_guard = threading.Lock()


def _unwritable(path: Path, exc: OSError, advice: str) -> None:
    with _warned_guard:
        if path.parent in _warned:
            return
        _warned.add(path.parent)
    reason = exc.strerror if exc.strerror else str(exc)
    logging.getLogger("ctxmw").warning(
        "ctxmw cannot write the telemetry ledger %s (%s); calls go on unrecorded, and further "
        "failures in %s are not logged. %s",
        path,
        reason,
        path.parent,
        advice,
    )


def _owner_only(path: str, flags: int) -> int:
    """``open``'s opener: a new file is ``0o600`` whatever the umask."""
    fd = os.open(path, flags, 0o600)
    if os.fstat(fd).st_size == 0:
        os.fchmod(fd, 0o600)
    return fd
