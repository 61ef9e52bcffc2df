"""Canonical bytes and digests of the wire payload, one message at a time, cached by identity.

The canonical form of a message is its compact JSON with keys in insertion order (the order the
provider receives them), minus ``cache_control`` marks, with a content list that is one bare
text part written as its string. Marks and that one-part form are stripped because the providers
that use them render both forms as the same cached content: moving a breakpoint from one call to
the next (as ``cache_breakpoints`` does) does not break a prefix.

:func:`canonical_json` is the other canonical form, for equality and digests of *content*
(repeated tool calls, cached summaries): keys sorted, so two dicts that say the same thing in
another key order are one text. Nothing else in ctxmw writes its own.

Digests are cached per message object: strategies pass unchanged messages on as the same dicts,
so a call only serialises the messages it has not seen before (new ones, and the compacted
copies a strategy rebuilds). A dict edited in place after it was sent is not re-read. A message's
digest is taken over its normal form (:mod:`ctxmw.messages.normal`): ``content: ""`` or ``None``
beside tool calls, provider extras and re-spaced tool arguments do not move the prefix.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxmw.messages._json import canonical_json, json_default
from ctxmw.messages.normal import normal_message

__all__ = [
    "DigestCache",
    "canonical_bytes",
    "canonical_json",
    "has_cache_mark",
    "message_digest",
    "payload_digest",
    "tools_digest",
]

_DIGEST_SIZE = 16


def canonical_bytes(message: Mapping[str, Any]) -> bytes:
    """The canonical serialisation of one message (or any JSON-like mapping).

    A lone surrogate (JSON's ``"\\ud800"``, a non-UTF-8 file name in a tool result) is kept as
    its own bytes (``surrogatepass``): such a message is digested, never an error.
    """
    return json.dumps(
        _unmarked(message), separators=(",", ":"), ensure_ascii=False, default=json_default
    ).encode("utf-8", "surrogatepass")


def message_digest(message: Mapping[str, Any]) -> bytes:
    """A message's digest, over its normal form: re-sent in the caller's own spelling, the same."""
    return hashlib.blake2b(
        canonical_bytes(normal_message(message)), digest_size=_DIGEST_SIZE
    ).digest()


def tools_digest(tools: Sequence[Mapping[str, Any]] | None) -> bytes:
    """Digest of the tools list (empty bytes when there are no tools)."""
    if not tools:
        return b""
    blob = b"\x1e".join(canonical_bytes(tool) for tool in tools)
    return hashlib.blake2b(blob, digest_size=_DIGEST_SIZE).digest()


def payload_digest(tools: bytes, messages: Iterable[bytes]) -> str:
    """Hex digest of a whole payload from its tools digest and per-message digests."""
    return hashlib.blake2b(tools + b"".join(messages), digest_size=_DIGEST_SIZE).hexdigest()


class DigestCache:
    """Per-message digests, cached by object identity across consecutive calls.

    Lookups run at C speed (``map`` over ids and a dict); only unseen messages are serialised.
    The cache holds a reference to every message it indexes, so an id is never confused with a
    recycled one. Call ``rotate()`` once per call: it drops the entries of messages no longer
    in use once they outnumber the live ones.
    """

    def __init__(self) -> None:
        self._index: dict[int, bytes] = {}
        self._refs: dict[int, object] = {}
        self._marked: set[int] = set()
        self._system: set[int] = set()
        self._seen: list[tuple[list[int], list[bytes], Sequence[object]]] = []

    def digests(self, messages: Sequence[Mapping[str, Any]]) -> list[bytes]:
        """The digest of every message, computing only those not seen in the last two calls."""
        for _, seen_digests, seen in self._seen:
            if seen is messages:  # the same list twice in one call (a strategy that passed)
                return seen_digests
        ids = list(map(id, messages))
        found = list(map(self._index.get, ids))
        if None in found:  # new messages sit at the end; rebuilt ones where a strategy put them
            for i in range(found.index(None), len(found)):
                if found[i] is None:
                    found[i] = self._compute(ids[i], messages[i])
        digests: list[bytes] = found  # type: ignore[assignment]  # every None was filled
        self._seen.append((ids, digests, messages))
        return digests

    def has_system(self, messages: Sequence[Mapping[str, Any]]) -> bool:
        """Whether any of these (already digested) messages is a system message."""
        return not self._system.isdisjoint(map(id, messages))

    def marked_positions(self, messages: Sequence[Mapping[str, Any]]) -> set[int]:
        """Indices of the (already digested) messages that carry a ``cache_control`` mark."""
        if self._marked.isdisjoint(map(id, messages)):
            return set()
        return {i for i, message in enumerate(messages) if id(message) in self._marked}

    def rotate(self) -> None:
        """End a call. Entries of messages no longer in use are dropped once they outnumber the
        live ones (an amortised rebuild, so a call does not pay for a full copy of the index)."""
        live = {id(messages): ids for ids, _, messages in self._seen}
        in_use = sum(map(len, live.values()))
        if len(self._index) > 2 * in_use + 1024:
            index: dict[int, bytes] = {}
            refs: dict[int, object] = {}
            for ids, digests, messages in self._seen:
                index.update(zip(ids, digests, strict=True))
                refs.update(zip(ids, messages, strict=True))
            self._index, self._refs = index, refs
            self._marked.intersection_update(index)
            self._system.intersection_update(index)
        self._seen = []

    def _compute(self, key: int, message: Mapping[str, Any]) -> bytes:
        digest = message_digest(message)
        self._index[key] = digest
        self._refs[key] = message
        if message.get("role") == "system":
            self._system.add(key)
        if has_cache_mark(message):
            self._marked.add(key)
        return digest


def has_cache_mark(message: Mapping[str, Any]) -> bool:
    """Whether the message, or a part of its content, carries a ``cache_control`` mark."""
    if message.get("cache_control"):
        return True
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(part, Mapping) and part.get("cache_control") for part in content
    )


def _unmarked(message: Mapping[str, Any]) -> Mapping[str, Any]:
    content = message.get("content")
    if "cache_control" not in message and not isinstance(content, list):
        return message
    out = {key: value for key, value in message.items() if key != "cache_control"}
    if isinstance(content, list):
        parts = [_unmarked_part(part) for part in content]
        out["content"] = _bare_text(parts)
    return out


def _unmarked_part(part: Any) -> Any:
    if isinstance(part, Mapping) and "cache_control" in part:
        return {key: value for key, value in part.items() if key != "cache_control"}
    return part


def _bare_text(parts: list[Any]) -> Any:
    if len(parts) == 1 and isinstance(parts[0], Mapping):
        only = parts[0]
        if set(only) == {"type", "text"} and only["type"] == "text":
            return only["text"]
    return parts
