"""Canonical bytes and digests of the wire payload, one message at a time.

The canonical form of a message is its compact JSON with keys in insertion order (the order the
provider receives them), minus ``cache_control`` marks, with a content list that is one bare
text part written as its string. Marks and that one-part form are stripped because the providers
that use them render both forms as the same cached content: moving a breakpoint from one call to
the next (as ``cache_breakpoints`` does) does not break a prefix.

:func:`canonical_json` is the other canonical form, for equality and digests of *content*
(repeated tool calls, cached summaries): keys sorted, so two dicts that say the same thing in
another key order are one text. Nothing else in ctxmw writes its own.

The telemetry digests a call's lists through :class:`~ctxmw.history.DigestSlots`, which keeps
them per message object: strategies pass unchanged messages on as the same dicts, so a call only
serialises the messages it has not seen before (new ones, and the compacted copies a strategy
rebuilds). A dict edited in place after it was sent is not re-read. A message's digest is taken
over its normal form (:mod:`ctxmw.messages.normal`): ``content: ""`` or ``None``
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
