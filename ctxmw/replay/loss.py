"""What the model loses: the strings its next action took from earlier tool results, and
whether the prompt a strategy list built still shows them.

Definitions (replay measures these at every call point, for every strategy list):

- **A token** is a maximal run of the characters ``A-Z a-z 0-9 _ . / : -`` with leading and
  trailing ``. / : -`` trimmed (a path at the end of a sentence loses its full stop, a directory
  its trailing slash, a flag its dashes). So ``src/ctxmw/replay.py:142``, ``Spotter.Repo``,
  ``max_tool_chars`` and ``2024-06-01`` are tokens, and quotes, brackets, commas, spaces and
  backslashes end them.
- **A distinctive string** is a token of at least :data:`MIN_LENGTH` (8) characters holding a
  mark that plain words lack: a digit, ``_``, ``/``, ``.``, ``:``, a ``-`` between two letters
  or digits (``data-message-id``), or an inner capital (a capital after a small letter,
  ``LiveView``, or before one after another capital, ``HTTPServer``). A lone word (``migration``,
  ``Annotation``, ``IMPORTANT``) is never distinctive, however long: the next message would
  reuse it whether or not the prompt still showed the result it came from.
- **The references of a call point** (the assistant message ``messages[i]``; the prompt was
  built from ``messages[:i]``) are the distinctive strings of that recorded message, read in its
  text and in the string values of its tool-call arguments (decoded from JSON, so keys such as
  ``file_path`` are not read), whose first occurrence in the conversation (the first message
  whose text or tool-call arguments contain it) is a tool result (a ``tool`` message). A string
  the user typed, or the agent wrote itself before, is not a reference: the model did not need
  a tool result to know it.
- A reference is **shown** when it occurs anywhere in the prompt built at that call (the text of
  any message, tool-call arguments included); **recoverable** when not shown, but inside an
  original that the prompt points to by a read-back handle (a compacted result's
  ``ctxmw_expand handle HANDLE``, or an offload preview's ``[ctxmw offload HANDLE: ...``),
  which ``ctxmw_expand`` reads back at the price of one more model call; **gone** otherwise.
  "Occurs" means as a substring.
- **Hidden share**: gone / references (and recoverable / references apart), per transcript and
  strategy list, summed over every call point.

The work per transcript is done once, whatever the number of strategy lists: the text of every
message is read once, and each distinct reference string is searched for once in the whole
transcript, which gives the list of messages holding it. Per call point, only the messages a
strategy changed (compacted, cleared, summarised) are searched: an original the prompt passes on
unchanged (the same object) holds a reference exactly when it is on that list.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxmw.context.offload import handle_for
from ctxmw.context.readback import handles_in
from ctxmw.context.survival import content_text, message_text
from ctxmw.messages.form import call_arguments, role_of, tool_calls_of

__all__ = ["MIN_LENGTH", "CallLoss", "Lost", "ReferenceIndex", "distinctive"]

MIN_LENGTH = 8
"""The shortest distinctive string, in characters."""

_RUN = re.compile(r"[A-Za-z0-9_./:\-]+")
_TRIM = "./:-"
_MARK = re.compile(r"[0-9_./:]|[A-Za-z0-9]-[A-Za-z0-9]|[a-z][A-Z]|[A-Z][A-Z][a-z]")
_SHOWN: dict[bool, Literal["compacted", "dropped"]] = {True: "compacted", False: "dropped"}
_SEPARATOR = "\0"  # never inside a token: no search crosses from one message into the next


def distinctive(text: str) -> list[str]:
    """The distinctive strings of ``text``, each once, in order of first appearance."""
    found: dict[str, None] = {}
    for run in _RUN.findall(text):
        token = run.strip(_TRIM)
        if len(token) >= MIN_LENGTH and _MARK.search(token):
            found[token] = None
    return list(found)


def action_text(message: Any) -> str:
    """What an assistant message says: its text and the string values of its tool arguments."""
    parts = [content_text(message.get("content")) if isinstance(message, Mapping) else ""]
    for tc in tool_calls_of(message):
        parts.extend(_strings(_decoded(call_arguments(tc))))
    return "\n".join(part for part in parts if part)


def _decoded(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # a model's malformed arguments are still what it wrote


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@dataclass(frozen=True, slots=True)
class Lost:
    """One reference a prompt did not show.

    Attributes:
        text: the string.
        source: index of the tool result it first occurred in.
        recoverable: behind a read-back handle the prompt shows (else gone).
        source_shown: how the prompt shows that result: ``compacted`` (changed, a placeholder
            included) or ``dropped`` (not at all).
        pointed: index of the original holding it that a handle in the prompt points to
            (-1 when gone): what a read-back reads.
    """

    text: str
    source: int
    recoverable: bool
    source_shown: Literal["compacted", "dropped"]
    pointed: int = -1


@dataclass(frozen=True, slots=True)
class CallLoss:
    """The references of one call point and what the prompt did with them."""

    references: int = 0
    shown: int = 0
    lost: tuple[Lost, ...] = field(default=(), repr=False)

    @property
    def recoverable(self) -> int:
        """References only behind a read-back handle."""
        return sum(1 for item in self.lost if item.recoverable)

    @property
    def gone(self) -> int:
        """References neither shown nor recoverable."""
        return len(self.lost) - self.recoverable


class ReferenceIndex:
    """One transcript's references, and where each occurs; measures any prompt built from it.

    Args:
        messages: the transcript (the same message objects the strategies are given).
    """

    def __init__(self, messages: Sequence[Any]) -> None:
        self._messages = messages
        self._ids = [id(m) for m in messages]
        self._originals = set(self._ids)  # an original is alive (held here): no id reuse
        self._texts: dict[int, tuple[Any, str]] = {}
        texts = [message_text(m) for m in messages]
        self._starts: list[int] = []
        offset = 0
        for text in texts:
            self._starts.append(offset)
            offset += len(text) + len(_SEPARATOR)
        self._corpus = _SEPARATOR.join(texts)
        self._occurs: dict[str, list[int]] = {}
        self._references: dict[int, list[tuple[str, list[int]]]] = {}
        self._handles: dict[str, int] | None = None

    def references(self, point: int) -> list[tuple[str, list[int]]]:
        """The references of call point ``point``: each string, with the messages before the
        point that hold it (the first one is its source, a tool result)."""
        known = self._references.get(point)
        if known is None:
            known = self._references[point] = list(self._find(point))
        return known

    def _find(self, point: int) -> Iterator[tuple[str, list[int]]]:
        for text in distinctive(action_text(self._messages[point])):
            where = self.occurrences(text)
            before = where[: bisect_left(where, point)]
            if before and role_of(self._messages[before[0]]) == "tool":
                yield text, before

    def occurrences(self, text: str) -> list[int]:
        """Indices of every message whose text holds ``text``, in order (searched once)."""
        found = self._occurs.get(text)
        if found is None:
            found = self._occurs[text] = self._search(text)
        return found

    def _search(self, text: str) -> list[int]:
        found: list[int] = []
        at = self._corpus.find(text)
        while at >= 0:
            j = bisect_right(self._starts, at) - 1
            found.append(j)
            # Past this message: one entry per message, however often it repeats the string.
            nxt = self._starts[j + 1] if j + 1 < len(self._starts) else len(self._corpus)
            at = self._corpus.find(text, nxt)
        return found

    def measure(self, point: int, prompt: Sequence[Any]) -> CallLoss:
        """What ``prompt`` (built at call point ``point``) shows of the point's references."""
        refs = self.references(point)
        if not refs:
            return CallLoss()
        present = set(map(id, prompt))
        ids = self._ids
        missing = [(t, where) for t, where in refs if not any(ids[j] in present for j in where)]
        if not missing:
            return CallLoss(len(refs), len(refs))
        changed = [m for m in prompt if id(m) not in self._originals]
        seen = self._changed_text(changed)
        missing = [(t, where) for t, where in missing if t not in seen]
        if not missing:
            return CallLoss(len(refs), len(refs))
        pointed = self._pointed(seen)
        results = {m.get("tool_call_id") for m in changed if role_of(m) == "tool"}
        lost = tuple(self._lost(text, where, pointed, results) for text, where in missing)
        return CallLoss(len(refs), len(refs) - len(lost), lost)

    def _changed_text(self, changed: list[Any]) -> str:
        """The text of the messages a strategy made, each read once while it is being sent."""
        known, kept = self._texts, {}
        for msg in changed:
            entry = known.get(id(msg))
            kept[id(msg)] = (
                entry if entry is not None and entry[0] is msg else (msg, message_text(msg))
            )
        self._texts = kept
        return _SEPARATOR.join(text for _, text in kept.values())

    def _lost(self, text: str, where: list[int], pointed: set[int], results: set[Any]) -> Lost:
        source = where[0]
        shown = self._messages[source].get("tool_call_id") in results
        at = next((j for j in reversed(where) if j in pointed), -1)
        return Lost(text, source, at >= 0, _SHOWN[shown], at)

    def _pointed(self, seen: str) -> set[int]:
        """The originals the prompt's read-back handles point to."""
        handles = handles_in(seen)
        if not handles:
            return set()
        table = self._handle_table()
        return {table[h] for h in handles if h in table}

    def _handle_table(self) -> dict[str, int]:
        if self._handles is None:
            self._handles = {
                handle_for(str(m.get("tool_call_id")), m["content"]): j
                for j, m in enumerate(self._messages)
                if role_of(m) == "tool" and isinstance(m.get("content"), str)
            }
        return self._handles
