"""What the prefix tracker keeps of one payload, and the pure measures it takes of two.

:class:`~ctxmw.telemetry.prefix.PrefixTracker` keeps one :class:`Snapshot` (the previous
payload: its messages, digests, cumulative token counts and layers) and measures the next
payload against it with these functions; :func:`snapshot_json` and :func:`snapshot_from_json`
carry a snapshot between the replicas of a fleet (``ctxmw.state``).
"""

from __future__ import annotations

import hashlib
import os
from array import array
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxmw.messages.form import layer_of, role_of
from ctxmw.telemetry.marks import within_lookback

__all__ = [
    "ReplyKey",
    "Snapshot",
    "extend_layers",
    "layer_totals",
    "marked_prefix",
    "payload_hash",
    "reply_key",
    "shared_text",
    "snapshot_from_json",
    "snapshot_json",
    "system_at",
    "tools_marked",
]

_DIGEST_SIZE = 16  # canonical.payload_digest's


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


def snapshot_json(prev: Snapshot) -> dict[str, Any]:
    """A snapshot as JSON-ready data."""
    return {
        "messages": [dict(m) for m in prev.messages],
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
    return Snapshot(
        list(data["messages"]),
        [bytes.fromhex(d) for d in data["digests"]],
        array("q", [int(n) for n in data["cumulative"]]),
        array("q", [int(n) for layer in data["layers"] for n in layer]),
        array("q", [int(i) for i in data["last_user"]]),
        bytes.fromhex(data["tools"]),
        int(data["tools_tokens"]),
        bool(data["tools_marked"]),
        frozenset(int(i) for i in data["marked"]),
    )


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
