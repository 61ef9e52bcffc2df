"""Conversation identity for a stateless caller: which conversation a request continues.

In order: the request's ``litellm_session_id`` (the ``x-litellm-session-id`` header overrides
the body's; the proxy merges both into ``data["litellm_session_id"]``), then
``metadata.session_id``, else a digest of the conversation's stable head: the system (or
developer) messages before the first user message, and that first user message. A head digest
is named as such in the ledger (``identity: "head"``): two conversations that open with the same
words share it, so clients that can send a session id should.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxmw.messages.canonical import canonical_bytes

__all__ = ["Identity", "conversation_identity"]

_MAX_ID = 200


@dataclass(frozen=True, slots=True)
class Identity:
    """A request's conversation.

    Attributes:
        conversation: the id every replica keys the conversation's state by.
        source: ``"session_id"`` (litellm_session_id or its header), ``"metadata"``
            (``metadata.session_id``) or ``"head"`` (a digest of the stable head).
    """

    conversation: str
    source: str


def conversation_identity(data: Mapping[str, Any]) -> Identity:
    """The conversation of a proxy request (``data`` as the proxy's pre-call hook sees it)."""
    session = _text(data.get("litellm_session_id"))
    if session:
        return Identity(session, "session_id")
    metadata = data.get("metadata")
    if isinstance(metadata, Mapping) and (meta_id := _text(metadata.get("session_id"))):
        return Identity(meta_id, "metadata")
    return Identity("head-" + head_digest(data.get("messages") or []), "head")


def head_digest(messages: Sequence[Any]) -> str:
    """Hex digest of the system/developer messages up to the first user message, and that one."""
    digest = hashlib.blake2b(digest_size=16)
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role in ("system", "developer", "user"):
            digest.update(canonical_bytes(message))
            digest.update(b"\n")
        if role == "user":
            break
    return digest.hexdigest()


def _text(value: object) -> str:
    if not isinstance(value, str | int) or isinstance(value, bool):
        return ""
    return str(value).strip()[:_MAX_ID]
