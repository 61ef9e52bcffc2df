"""The save_file's revisions: how a caller's edited history is recorded without losing any of it.

A save_file is JSON Lines. Most lines are messages (a JSON object with a ``"role"``), appended to
the conversation's current revision. Two kinds of record line (a JSON object with a ``"ctxmw"``
key and no ``"role"``) say more:

* ``{"ctxmw": "edit", "ops": [[at, drop, count], ...]}`` starts a new revision: in the current
  one, for each op (ascending, on the old positions), ``drop`` messages from index ``at`` are
  replaced by the next ``count`` message lines. The revision before it stays readable in the file.
* ``{"ctxmw": "tool_loop", "count": n}``: the next ``n`` message lines are a tool round that
  ctxmw's own loop ran for Python callables (the caller never saw them).
* ``{"ctxmw": "readback", "count": n}``: the next ``n`` message lines are read-back rounds ctxmw
  answered inside the call that produced the message line after them (assistant messages
  calling ``ctxmw_expand``, and the answers). They belong to no revision: no later prompt
  carries them.
* ``{"ctxmw": "readback", "count": n, "splice": true}``: the next ``n`` lines are a reply as the
  model sent it, calling the caller's tools and reading back, then the read-backs' answers;
  the message line after them is that reply as the caller got it (its own calls only). Every
  later prompt holding that reply carries the read-backs again (see
  :mod:`ctxmw.runtime._splices`).

Every record carries ``"bytes"``: the size of the message lines it announces, a second account
that tells a damaged count from a write cut short (records of earlier versions have none).

A file whose history only grew is plain messages, one per line, as before revisions existed.

A stateless caller's history is the conversation: :func:`plan_history` lines it up against the
current revision (with :func:`~ctxmw.messages.normal.same_message`) and returns what to send and
what to record.
"""

from __future__ import annotations

import difflib
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxmw.errors import InvalidTranscriptError
from ctxmw.history import common_prefix
from ctxmw.messages.normal import normal_key, same_message
from ctxmw.runtime._splices import Key, Readbacks, Splice, live_splices
from ctxmw.types import Message, Messages

__all__ = [
    "BYTES_KEY",
    "RECORD_KEY",
    "Edit",
    "Plan",
    "Revisions",
    "is_record",
    "loop_record",
    "plan_history",
    "readback_record",
    "record_span",
    "replay",
]

RECORD_KEY = "ctxmw"
"""The key that marks a record line (messages never carry it and always carry ``role``)."""

BYTES_KEY = "bytes"
"""A record's second account of its message lines: their size in bytes (newlines included), so
a damaged count is told from a write cut short (:mod:`ctxmw.runtime._lines`)."""

Op = tuple[int, int, int]
"""``(at, drop, count)`` on the current revision: ``drop`` messages at ``at`` become ``count``."""


def is_record(line: dict[str, Any]) -> bool:
    """Whether a decoded line is a record rather than a message."""
    return RECORD_KEY in line and "role" not in line


def loop_record(count: int, size: int | None = None) -> dict[str, Any]:
    """The record that marks the next ``count`` messages (``size`` bytes) as ctxmw's own tool
    round."""
    record: dict[str, Any] = {RECORD_KEY: "tool_loop", "count": count}
    if size is not None:
        record[BYTES_KEY] = size
    return record


def readback_record(block: Readbacks, size: int | None = None) -> dict[str, Any]:
    """The record that announces one reply's read-back lines (``size`` bytes; see the module
    docstring)."""
    record: dict[str, Any] = {RECORD_KEY: "readback", "count": len(block.lines)}
    if block.splice is not None:
        record["splice"] = True
    if size is not None:
        record[BYTES_KEY] = size
    return record


@dataclass(frozen=True, slots=True)
class Edit:
    """A change of revision: ops on the current revision and the messages they insert."""

    ops: tuple[Op, ...]
    inserted: tuple[Message, ...]

    def record(self, size: int | None = None) -> dict[str, Any]:
        """The record line that announces this edit (its messages, ``size`` bytes, follow it)."""
        record: dict[str, Any] = {RECORD_KEY: "edit", "ops": [list(op) for op in self.ops]}
        if size is not None:
            record[BYTES_KEY] = size
        return record

    def apply(self, messages: Messages, ours: list[bool]) -> tuple[Messages, list[bool]]:
        """The revision after this edit, with its tool-loop marks (inserted ones are not)."""
        out: Messages = []
        marks: list[bool] = []
        last = 0
        taken = 0
        for at, drop, count in self.ops:
            out.extend(messages[last:at])
            marks.extend(ours[last:at])
            out.extend(self.inserted[taken : taken + count])
            marks.extend([False] * count)
            taken += count
            last = at + drop
        out.extend(messages[last:])
        marks.extend(ours[last:])
        return out, marks


@dataclass(slots=True)
class Revisions:
    """The file's conversation as it is replayed line by line.

    Attributes:
        current: the current revision's messages.
        ours: for each of ``current``, whether ctxmw's tool loop produced it.
        earlier: every earlier revision, oldest first (kept only when ``keep_earlier``).
        edits: how many edit records were applied.
        splices: the read-backs kept beside the caller's calls, by their reply's call ids
            (only those whose reply is in ``current``, once :meth:`settle` ran).
    """

    keep_earlier: bool = False
    current: Messages = field(default_factory=list)
    ours: list[bool] = field(default_factory=list)
    earlier: list[Messages] = field(default_factory=list)
    edits: int = 0
    splices: dict[Key, Splice] = field(default_factory=dict)

    def append(self, message: Message, *, ours: bool = False) -> None:
        """A message line: the current revision grows."""
        self.current.append(message)
        self.ours.append(ours)

    def edit(self, edit: Edit) -> None:
        """An edit record with its messages: a new revision begins."""
        if self.keep_earlier:
            self.earlier.append(list(self.current))
        self.current, self.ours = edit.apply(self.current, self.ours)
        self.edits += 1

    def read_back(self, record: dict[str, Any], block: Messages) -> None:
        """A readback record with its lines: a splice is kept (answered rounds belong to no
        revision)."""
        splice = Splice.from_lines(block) if record.get("splice") is True else None
        if splice is not None:
            self.splices[splice.key] = splice

    def settle(self) -> None:
        """Keep only the splices whose reply is in the current revision."""
        self.splices = live_splices(self.splices, self.current)


def parse_edit(record: dict[str, Any]) -> list[Op] | None:
    """The ops of an edit record, or None when it is not a well-formed one."""
    ops = record.get("ops")
    if not isinstance(ops, list):
        return None
    out: list[Op] = []
    for op in ops:
        if not (isinstance(op, list) and len(op) == 3 and all(_count(v) for v in op)):
            return None
        out.append((op[0], op[1], op[2]))
    return out


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True, slots=True)
class Plan:
    """What one stateless call sends and records.

    Attributes:
        conversation: the messages the strategies receive: the caller's own objects, with the
            tool rounds ctxmw's loop ran restored where the rule allows.
        edit: the change of revision to record, or None when the history only grew.
        appended: the caller's new messages beyond the current revision (when ``edit`` is None).
    """

    conversation: Messages
    edit: Edit | None
    appended: Messages


KeyCache = MutableMapping[int, tuple[Any, str]]
"""Normal keys by object id, each beside its object (which keeps the id from being reused)."""


def plan_history(
    stored: Sequence[Message],
    ours: Sequence[bool],
    given: Messages,
    *,
    hint: Sequence[Message] = (),
    keys: KeyCache | None = None,
    same: int | None = None,
) -> Plan:
    """Line the caller's history up against the current revision.

    The caller's messages are the conversation. The one exception: a run of messages marked as
    ctxmw's tool round is put back where everything before it matched exactly and the caller's
    next message is the answer that followed the run. Anything else that differs (an edit, a
    removal, a restarted turn, a moving system prompt) becomes an :class:`Edit`.

    The work grows with what is new. ``hint`` (the previous call's ``conversation``, whose
    messages are the same as ``stored``'s at the same positions) gives the common prefix by
    identity, then plain equality, without normalising a message; ``keys`` keeps the normal
    keys an edit compares, so a message object is normalised once per conversation. ``same``,
    when the caller already measured it, is how many leading messages of ``given`` are
    ``hint``'s (the same objects, or equal), so they are not compared again.
    """
    n = min(same, len(stored)) if same is not None else _same_prefix(hint, given, len(stored))
    conversation: Messages = given[:n]  # a new list: given is one
    i = j = len(conversation)
    while i < len(stored) and j < len(given):
        if same_message(stored[i], given[j]):
            conversation.append(given[j])
            i, j = i + 1, j + 1
            continue
        k = _run_end(ours, i)
        if k == i or k == len(stored) or not same_message(stored[k], given[j]):
            break
        conversation.extend(stored[i:k])
        i = k
    conversation.extend(given[j:])
    if i == len(stored):
        return Plan(conversation, None, list(given[j:]))
    start = len(conversation) - (len(given) - j)  # conversation[:start] lines up with stored[:i]
    edit = diff(stored, conversation, keys=keys, start=min(i, start), hint=hint)
    return Plan(conversation, edit, [])


def _same_prefix(hint: Sequence[Message], given: Sequence[Message], limit: int) -> int:
    """How many leading messages of ``given`` are ``hint``'s (the same object, or equal)."""
    n = min(len(hint), len(given), limit)
    # In C: list comparison tries identity first (a dict's own ``!=`` walks its items).
    return common_prefix(hint[:n], given[:n])


def diff(
    old: Sequence[Message],
    new: Sequence[Message],
    *,
    keys: KeyCache | None = None,
    start: int = 0,
    hint: Sequence[Message] = (),
) -> Edit:
    """The smallest-effort ops that turn ``old`` into ``new`` (messages compared normalised).

    ``old[:start]`` and ``new[:start]`` are known to be the same messages and are not compared;
    ``keys`` caches normal keys by message object; a message of ``new`` equal to the ``hint``
    message it lines up with (the previous call's) takes that one's key without normalising.
    """
    key = _keyer(keys)
    a = [key(m) for m in old[start:]]
    b = _aligned_keys(new, hint, start, key, keys)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    ops: list[Op] = []
    inserted: list[Message] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            ops.append((start + i1, i2 - i1, j2 - j1))
            inserted.extend(new[start + j1 : start + j2])
    return Edit(tuple(ops), tuple(inserted))


_RESYNC = 4  # messages a caller removed at once that the alignment skips (a tool pair or two)


def _aligned_keys(
    new: Sequence[Message], hint: Sequence[Message], start: int, key: Any, keys: KeyCache | None
) -> list[str]:
    """Normal keys of ``new[start:]``, taken from the equal ``hint`` message where one lines up.

    Equal dicts have equal normal forms, so a taken key is exact; the alignment (a pointer into
    ``hint`` that skips a few removed messages) only decides how often normalising is avoided.
    """
    out: list[str] = []
    k = start
    for message in new[start:]:
        match = next((n for n in range(k, min(k + _RESYNC, len(hint))) if hint[n] == message), None)
        if match is None:
            out.append(key(message))
            continue
        text = key(hint[match])
        if keys is not None:
            keys[id(message)] = (message, text)
        out.append(text)
        k = match + 1
    return out


def _keyer(keys: KeyCache | None) -> Any:
    if keys is None:
        return normal_key

    def key(message: Message) -> str:
        found = keys.get(id(message))
        if found is not None and found[0] is message:
            return found[1]
        text = normal_key(message)
        keys[id(message)] = (message, text)
        return text

    return key


def _run_end(ours: Sequence[bool], i: int) -> int:
    while i < len(ours) and ours[i]:
        i += 1
    return i


def record_span(line: dict[str, Any]) -> int:
    """How many message lines after this line belong to it (0 for a message line)."""
    if not is_record(line):
        return 0
    if line[RECORD_KEY] == "edit":
        ops = parse_edit(line)
        return sum(op[2] for op in ops) if ops is not None else 0
    count = line.get("count")
    if line[RECORD_KEY] in _COUNTED and isinstance(count, int) and _count(count):
        return count
    return 0


_COUNTED = ("tool_loop", "readback")
"""The records whose ``count`` message lines follow them."""


def replay(lines: Sequence[dict[str, Any]], *, keep_earlier: bool = False) -> Revisions:
    """Replay decoded lines (messages and records) into the conversation's revisions.

    Raises:
        InvalidTranscriptError: a record is unknown or malformed, or its ops do not fit.
    """
    revisions = Revisions(keep_earlier)
    n = 0
    while n < len(lines):
        line = lines[n]
        if not is_record(line):
            revisions.append(line)
            n += 1
            continue
        span = record_span(line)
        block = list(lines[n + 1 : n + 1 + span])
        _check_block(line, block, span, len(revisions.current))
        if line[RECORD_KEY] == "edit":
            ops = parse_edit(line) or []
            revisions.edit(Edit(tuple(ops), tuple(block)))
        elif line[RECORD_KEY] == "readback":
            revisions.read_back(line, block)
        else:
            for message in block:
                revisions.append(message, ours=True)
        n += 1 + span
    revisions.settle()
    return revisions


def _check_block(line: dict[str, Any], block: Messages, span: int, size: int) -> None:
    kind = line.get(RECORD_KEY)
    if kind == "edit" and parse_edit(line) is not None:
        ops = parse_edit(line) or []
        ends = [0, *(at + drop for at, drop, _ in ops)]
        fits = all(at >= end for (at, _, _), end in zip(ops, ends, strict=False))
        if not fits or ends[-1] > size:
            _bad(line, f"its ops do not fit a revision of {size} message(s)", size)
    elif kind not in _COUNTED or span == 0:
        _bad(line, "it is not an edit, tool_loop or readback record ctxmw writes", size)
    if len(block) < span or any(is_record(m) for m in block):
        _bad(line, f"it announces {span} message line(s) that do not follow it", size)


def _bad(line: dict[str, Any], why: str, index: int) -> None:
    raise InvalidTranscriptError(
        f"the record {line!r} cannot be applied: {why}. The file is damaged; repair or move "
        "that line (the line format is in docs/sessions.md, 'The save_file').",
        index,
    )
