"""What the prefix tracker keeps of one payload, and the pure measures it takes of two.

:class:`~ctxmw.telemetry.prefix.PrefixTracker` keeps one :class:`Snapshot` (the previous
payload: its messages, digests, cumulative token counts and layers) and measures the next
payload against it with these functions; :func:`snapshot_json` and :func:`snapshot_from_json`
carry a snapshot between the replicas of a fleet (``ctxmw.state``).

What is carried holds no message content: per message its digest, token counts, role and a
*text ladder* (:func:`text_ladder`): digests of the leading 64, 128, 256, ... characters of a
text content and of the whole. A restored snapshot measures the leading text a changed message
shares with its previous version (:func:`ladder_shared`) from those: the longest rung both
texts agree on, cut back to a word boundary, a lower bound of what :func:`shared_text` finds
when it has both texts.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxmw.messages.form import layer_of, role_of
from ctxmw.telemetry.marks import within_lookback

__all__ = [
    "ReplyKey",
    "Snapshot",
    "extend_layers",
    "ladder_shared",
    "layer_totals",
    "marked_prefix",
    "payload_hash",
    "reply_key",
    "shared_text",
    "snapshot_from_json",
    "snapshot_json",
    "system_at",
    "text_ladder",
    "tools_marked",
]

_DIGEST_SIZE = 16  # canonical.payload_digest's
_RUNG_SIZE = 8  # a text ladder's digests: a match is a measurement, not an identity
_FIRST_RUNG = 64
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

TextLadder = tuple[int, bytes]
"""A text's length in characters and the digests of its rungs (see :func:`text_ladder`)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One payload as the tracker keeps it until the next call."""

    messages: Sequence[Mapping[str, Any]]
    digests: list[bytes]
    # Machine-integer arrays, not lists of int objects: 8 bytes per message each.
    cumulative: array[int]  # cumulative[i] = tokens of messages[:i]
    layers: array[int]  # [3i:3i+3]: system, tool results, the rest, over messages[:i]
    last_user: array[int]  # last_user[i] = index of the newest user message in messages[:i]
    tools: bytes
    tools_tokens: int
    tools_marked: bool
    marked: frozenset[int]
    hashed: Any = None  # blake2b state over tools + digests (None: not kept)
    # A restored snapshot's text ladders (its messages are then {"role": ...} only); None when
    # the messages are the payload's own.
    texts: Sequence[TextLadder | None] | None = None


def snapshot_json(prev: Snapshot) -> dict[str, Any]:
    """A snapshot as JSON-ready data: digests, counts, roles and text ladders, no content."""
    texts = prev.texts if prev.texts is not None else [text_ladder(m) for m in prev.messages]
    return {
        "roles": [_role(m) for m in prev.messages],
        "texts": [None if t is None else [t[0], t[1].hex()] for t in texts],
        "digests": [d.hex() for d in prev.digests],
        "cumulative": list(prev.cumulative),
        "layers": [list(prev.layers[i : i + 3]) for i in range(0, len(prev.layers), 3)],
        "last_user": list(prev.last_user),
        "tools": prev.tools.hex(),
        "tools_tokens": prev.tools_tokens,
        "tools_marked": prev.tools_marked,
        "marked": sorted(prev.marked),
    }


def snapshot_from_json(data: Mapping[str, Any]) -> Snapshot:
    """A snapshot from :func:`snapshot_json`'s data."""
    texts = [None if t is None else (int(t[0]), bytes.fromhex(t[1])) for t in data["texts"]]
    return Snapshot(
        [{"role": role} for role in data["roles"]],
        [bytes.fromhex(d) for d in data["digests"]],
        array("q", [int(n) for n in data["cumulative"]]),
        array("q", [int(n) for layer in data["layers"] for n in layer]),
        array("q", [int(i) for i in data["last_user"]]),
        bytes.fromhex(data["tools"]),
        int(data["tools_tokens"]),
        bool(data["tools_marked"]),
        frozenset(int(i) for i in data["marked"]),
        texts=texts,
    )


def _role(message: Mapping[str, Any]) -> str:
    role = message.get("role")
    return role if isinstance(role, str) and role in _ROLES else ""


def text_ladder(message: Mapping[str, Any]) -> TextLadder | None:
    """Digests of a text content's leading 64, 128, 256, ... characters and of the whole
    (None for a message whose content is not text)."""
    text = message.get("content")
    if not isinstance(text, str):
        return None
    rungs = b"".join(digest for _, digest in _rungs(text, len(text)))
    return len(text), rungs


def ladder_shared(previous: TextLadder | None, current: Mapping[str, Any]) -> str:
    """:func:`shared_text` of a message known by its ladder and ``current`` (same role), as
    far as the ladder tells: the longest rung the two texts agree on, whole when it is the
    previous text whole, else cut back to a word boundary."""
    text = current.get("content")
    if previous is None or not isinstance(text, str):
        return ""
    length, digests = previous
    agreed = 0
    for i, (at, digest) in enumerate(_rungs(text, length)):
        if digest != digests[i * _RUNG_SIZE : (i + 1) * _RUNG_SIZE]:
            break
        agreed = at
    if agreed == length:
        return text[:length]
    shared = text[:agreed]
    return shared[: max(shared.rfind(" "), shared.rfind("\n"), 0)]


def _rungs(text: str, length: int) -> Iterator[tuple[int, bytes]]:
    """``(end, digest of text[:end])`` for each rung of a text of ``length`` characters, while
    ``text`` (which may be another text) reaches it: one pass over it."""
    hashed, done, end = hashlib.blake2b(digest_size=_RUNG_SIZE), 0, _FIRST_RUNG
    while True:
        end = min(end, length)
        if end > len(text):
            return
        hashed.update(text[done:end].encode("utf-8", "surrogatepass"))
        yield end, hashed.copy().digest()
        if end == length:
            return
        done, end = end, end * 2


def extend_layers(
    messages: Sequence[Mapping[str, Any]],
    cumulative: array[int],
    prev: Snapshot | None,
    common: int,
) -> tuple[array[int], array[int]]:
    """Per-layer running sums and the newest user message, extended past the common prefix."""
    layers = prev.layers[: 3 * (common + 1)] if prev is not None else array("q", [0, 0, 0])
    last_user = prev.last_user[: common + 1] if prev is not None else array("q", [-1])
    # Running sums in locals, the arrays extended once: a first call walks every message.
    system, tool, rest = layers[-3:]
    newest, sums, users = last_user[-1], list[int](), list[int]()
    for i in range(common, len(messages)):
        message, tokens = messages[i], cumulative[i + 1] - cumulative[i]
        # The newest user message's tokens move from history to current in _layer_totals.
        layer = layer_of(message, current=False)
        if layer == "system":
            system += tokens
        elif layer == "tool_results":
            tool += tokens
        else:
            rest += tokens
        sums += (system, tool, rest)
        newest = i if role_of(message) == "user" else newest
        users.append(newest)
    layers.extend(sums)
    last_user.extend(users)
    return layers, last_user


def payload_hash(
    prev: Snapshot | None, tools: bytes, digests: list[bytes], common: int, tools_changed: bool
) -> Any:
    """The payload's hash state: the previous one extended when the previous payload is a
    prefix of this one (the usual call), else hashed from the start."""
    extends = prev is not None and not tools_changed and common == len(prev.digests)
    if prev is not None and prev.hashed is not None and extends:
        hashed = prev.hashed.copy()
        hashed.update(b"".join(digests[common:]))
        return hashed
    hashed = hashlib.blake2b(tools, digest_size=_DIGEST_SIZE)
    hashed.update(b"".join(digests))
    return hashed


def layer_totals(cur: Snapshot) -> dict[str, int]:
    system, tool, rest = cur.layers[-3:]
    newest = cur.last_user[-1]
    current = cur.cumulative[newest + 1] - cur.cumulative[newest] if newest >= 0 else 0
    return {"system": system, "history": rest - current, "tool_results": tool, "current": current}


ReplyKey = tuple[str, str, tuple[tuple[str, str], ...]]
"""What makes two assistant messages the same reply: role, text, (tool name, arguments)."""


def reply_key(message: Mapping[str, Any]) -> ReplyKey:
    """A message's reply identity, blind to key order, ``None`` fields and object types."""
    calls = []
    for call in _field(message, "tool_calls") or ():
        function = _field(call, "function")
        name, arguments = _field(function, "name"), _field(function, "arguments")
        calls.append((str(name or ""), str(arguments or "")))
    content = _field(message, "content")
    text = content if isinstance(content, str) else ""
    return str(_field(message, "role") or ""), text, tuple(calls)


def _field(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def system_at(prev: Snapshot | None, cur: Snapshot, index: int) -> bool:
    roles = [
        payload.messages[index].get("role")
        for payload in (prev, cur)
        if payload is not None and index < len(payload.messages)
    ]
    return any(role in ("system", "developer") for role in roles)


def shared_text(previous: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    """The leading text two messages of the same role share, cut back to a word boundary.

    Only string contents count. The cut keeps the estimate on the safe side: a tokenizer may
    join the last shared characters with the first differing ones into one token.
    """
    a, b = previous.get("content"), current.get("content")
    if previous.get("role") != current.get("role") or not isinstance(a, str):
        return ""
    if not isinstance(b, str):
        return ""
    common = os.path.commonprefix([a, b])  # noqa: RUF071 - text, not paths
    if common in (a, b):
        return common
    return common[: max(common.rfind(" "), common.rfind("\n"), 0)]


def marked_prefix(prev: Snapshot | None, cur: Snapshot, common: int, tools_changed: bool) -> int:
    """Tokens up to the latest previous-call mark in the common prefix that a mark of this
    call finds within the provider's 20-block lookback (an entry nobody looks up is not read)."""
    if prev is None or tools_changed:
        return 0
    marks = sorted(cur.marked)
    for entry in sorted((i for i in prev.marked if i < common), reverse=True):
        after = bisect_left(marks, entry)
        if after < len(marks) and within_lookback(cur.messages, entry, marks[after]):
            return cur.tools_tokens + cur.cumulative[entry + 1]
    return cur.tools_tokens if prev.tools_marked and cur.tools_tokens else 0


def tools_marked(tools: Sequence[Mapping[str, Any]] | None) -> bool:
    return any(isinstance(tool, Mapping) and tool.get("cache_control") for tool in tools or ())
