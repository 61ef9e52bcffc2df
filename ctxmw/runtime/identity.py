"""Which conversation a call continues: the one identity function of the wrapper and the proxy.

In order: the call's ``save_file`` (its path as given; also inside ``metadata["ctxmw"]``), its
``session`` (likewise), litellm's ``litellm_session_id`` (through the LiteLLM Proxy the
``x-litellm-session-id`` header overrides the body's; the proxy merges both into
``data["litellm_session_id"]``), then ``metadata["session_id"]``. Ids are strings or integers,
stripped (:func:`normal_id`); a blank one falls through, and one over 200 characters keeps its
first 150 and a digest of the whole, so two different long ids stay two conversations. Without
any, ``head=True`` (the proxy) keys the conversation by a digest of its stable head: the system
(or developer) messages before the first user message, and that first user message. A head
digest is named as such in the ledger (``identity: "head"``): two conversations that open with
the same words share it, so clients that can send a session id should. The stateless wrapper
passes ``head=False``: a call that names no conversation is a conversation of its own. The
proxy passes ``options=False``: only litellm's own ids count there (a ``save_file`` or
``session`` a client puts in its request body names nothing).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from ctxmw.messages.canonical import canonical_bytes

__all__ = ["MAX_ID", "Identity", "conversation_identity", "head_digest", "normal_id"]

MAX_ID = 200
"""The longest id kept as it is; a longer one is shortened with a digest of the whole."""
_KEPT = 150


@dataclass(frozen=True, slots=True)
class Identity:
    """A call's conversation.

    Attributes:
        conversation: the id its state is kept by (in this process, or by every replica).
        source: ``"save_file"``, ``"session"`` (ctxmw's ``session`` option), ``"session_id"``
            (litellm_session_id or its header), ``"metadata"`` (``metadata.session_id``) or
            ``"head"`` (a digest of the stable head).
    """

    conversation: str
    source: str


@overload
def conversation_identity(
    call: Mapping[str, Any], *, head: Literal[True] = ..., options: bool = ...
) -> Identity: ...


@overload
def conversation_identity(
    call: Mapping[str, Any], *, head: bool, options: bool = ...
) -> Identity | None: ...


def conversation_identity(
    call: Mapping[str, Any], *, head: bool = True, options: bool = True
) -> Identity | None:
    """The conversation of a call (``acompletion``'s keyword arguments, or a proxy request's data).

    Args:
        call: the keyword arguments as the caller gave them (``messages`` for the head).
        head: without an id, key by the head digest (else return None).
        options: ctxmw's own ``save_file`` and ``session`` count (else litellm's ids only).
    """
    for source, value in _candidates(call, options):
        text = _path(value) if source == "save_file" else _text(value)
        if text:
            return Identity(text, source)
    if not head:
        return None
    return Identity("head-" + head_digest(call.get("messages") or []), "head")


def _candidates(call: Mapping[str, Any], options: bool) -> Iterator[tuple[str, Any]]:
    metadata = call.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    if options:
        nested = metadata.get("ctxmw")
        nested = nested if isinstance(nested, Mapping) else {}
        yield "save_file", call.get("save_file")
        yield "save_file", nested.get("save_file")
        yield "session", call.get("session")
        yield "session", nested.get("session")
    yield "session_id", call.get("litellm_session_id")
    yield "metadata", metadata.get("session_id")


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


def _path(value: object) -> str:
    # A path is kept exactly (never stripped or cut): it names a file.
    return os.fsdecode(value) if isinstance(value, str | os.PathLike) else ""


def _text(value: object) -> str:
    if not isinstance(value, str | int) or isinstance(value, bool):
        return ""
    return normal_id(str(value))


def normal_id(text: str) -> str:
    """An id as ctxmw keeps it: stripped; over :data:`MAX_ID` characters, its first 150 and
    ``~`` and a digest of the whole (``""`` for a blank one)."""
    text = text.strip()
    if len(text) <= MAX_ID:
        return text
    whole = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return f"{text[:_KEPT]}~{whole}"
