"""Read-backs kept beside a client's own tool calls, in the shared state: handles, never lines.

A reply that calls the client's tools and reads back reaches the client with its own calls
only. Every later prompt that holds that reply carries the read-backs again (as the library's
:mod:`ctxmw.runtime._splices` does), so the model sees what it read. The proxy keeps no message
content between requests, so the conversation's ``readbacks`` key holds, per such reply, only
the ids of its own calls (how the reply is found in the client's next request) and each
read-back's call id and arguments (a handle and a range: lines, a pattern, or characters).
Each request answers them again from its own messages: the same history gives the same bytes.

The key is the conversation's, and a conversation's id is scoped by the key's owner
(:mod:`ctxmw.proxy.tenancy`): one tenant's read-backs never reach another's prompt. It lives as
long as the conversation's other state (``DEFAULT_TTL_S`` after its last write) and holds at
most :data:`MAX_ENTRIES` replies and :data:`MAX_ARGUMENT_BYTES` of arguments per read-back;
replies the client no longer sends are forgotten at the next write.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxmw.messages.form import tool_calls_of
from ctxmw.proxy._replies import function_call
from ctxmw.runtime._splices import Key, Splice, call_ids
from ctxmw.state import State, key
from ctxmw.types import Message, Messages

__all__ = ["MAX_ARGUMENT_BYTES", "MAX_ENTRIES", "entry_of", "load", "save", "splices_of"]

PART = "readbacks"
MAX_ENTRIES = 32
"""Replies whose read-backs one conversation keeps (the oldest forgotten first)."""
MAX_ARGUMENT_BYTES = 1024
"""The longest arguments of one kept read-back: a handle and a range fit in a tenth of it."""

Entry = dict[str, Any]


async def load(state: State, conversation: str) -> list[Entry]:
    """The conversation's kept read-backs (none when the state holds nothing readable)."""
    raw = await state.get(key(conversation, PART))
    if not raw:
        return []
    try:
        entries = json.loads(raw)
    except ValueError:
        return []
    return [e for e in entries if _valid(e)] if isinstance(entries, list) else []


async def save(state: State, conversation: str, entries: Sequence[Entry]) -> None:
    """Keep ``entries`` (the newest :data:`MAX_ENTRIES`) as the conversation's read-backs."""
    kept = list(entries)[-MAX_ENTRIES:]
    if kept:
        await state.set(key(conversation, PART), json.dumps(kept, separators=(",", ":")))
    else:
        await state.delete(key(conversation, PART))


def entry_of(splice: Splice) -> Entry | None:
    """What the state keeps of ``splice`` (None: arguments over the bound, kept nowhere)."""
    calls = [
        {"id": str(c.get("id")), "arguments": str((c.get("function") or {}).get("arguments"))}
        for c in splice.calls
    ]
    if any(len(c["arguments"].encode()) > MAX_ARGUMENT_BYTES for c in calls):
        return None
    return {"key": list(splice.key), "calls": calls}


def splices_of(entries: Sequence[Entry], messages: Messages) -> dict[Key, tuple[Message, Entry]]:
    """The entries whose reply is among ``messages``: by the reply's call ids, the client's
    copy of the reply with the read-back calls after its own, and the entry."""
    by_key = {tuple(e["key"]): e for e in entries}
    out: dict[Key, tuple[Message, Entry]] = {}
    for message in messages:
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        entry = by_key.get(call_ids(message))
        if entry is not None:
            reads = [function_call(c["id"], _NAME, c["arguments"]) for c in entry["calls"]]
            out[call_ids(message)] = (
                {**message, "tool_calls": [*tool_calls_of(message), *reads]},
                entry,
            )
    return out


_NAME = "ctxmw_expand"


def _valid(entry: Any) -> bool:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("key"), list):
        return False
    calls = entry.get("calls")
    return isinstance(calls, list) and all(
        isinstance(c, Mapping)
        and isinstance(c.get("id"), str)
        and isinstance(c.get("arguments"), str)
        for c in calls
    )
