"""The proxy's bounds: what a tenant may store, and what a replica keeps between requests.

In the ``ctxmw:`` section of the proxy's ``config.yaml`` (every key optional; each value a
number, or ``os.environ/NAME`` like the rest of the file)::

    ctxmw:
      limits:
        note_bytes: 65536                  # one note's text
        abort_reason_bytes: 1024           # one abort's reason
        conversation_notes: 100            # notes waiting in one conversation
        conversation_note_bytes: 1048576   # their bytes
        scope_note_bytes: 16777216         # notes waiting in all conversations of one scope
        memo_bytes: 67108864               # the strategies' memos of this replica
        telemetry_bytes: 16777216          # saved telemetry states this replica keeps
        memory_state_bytes: 67108864       # values of ``state: memory``
        pending_bytes: 268435456           # requests between their first and last hook
        readback_bytes: 65536              # one ctxmw_expand answer

The note bounds are checked when a note is stored (HTTP 413 for one note over its bound, 429
for a conversation or scope that holds too much, naming the limit); the replica's bounds by
each structure that holds the bytes, the least recently used going first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ctxmw.errors import SettingsError

__all__ = ["ProxyLimits", "limits_from"]

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ProxyLimits:
    """The bounds (see the module docstring); every one in bytes except ``conversation_notes``.

    Attributes:
        note_bytes: the longest note text (UTF-8 bytes).
        abort_reason_bytes: the longest abort reason (UTF-8 bytes).
        conversation_notes: notes waiting (posted, not yet delivered) in one conversation.
        conversation_note_bytes: the bytes of the notes waiting in one conversation.
        scope_note_bytes: the bytes of the notes waiting in all conversations of one scope (a
            team, a user, a key).
        memo_bytes: the strategies' memos this replica keeps (the conversations' inputs and
            caches).
        telemetry_bytes: the saved telemetry states this replica keeps in memory.
        memory_state_bytes: the values and notes of ``state: memory`` (one replica).
        pending_bytes: requests between their first and last hook (a request whose last hook
            never ran is forgotten first).
        readback_bytes: the most UTF-8 bytes of one ``ctxmw_expand`` answer (beside the
            ``readback_max_chars`` setting; a longer one is cut and says so).
    """

    note_bytes: int = 64 * 1024
    abort_reason_bytes: int = 1024
    conversation_notes: int = 100
    conversation_note_bytes: int = _MIB
    scope_note_bytes: int = 16 * _MIB
    memo_bytes: int = 64 * _MIB
    telemetry_bytes: int = 16 * _MIB
    memory_state_bytes: int = 64 * _MIB
    pending_bytes: int = 256 * _MIB
    readback_bytes: int = 64 * 1024


def limits_from(options: object) -> ProxyLimits:
    """The limits of the ``limits`` mapping of the ctxmw section (defaults for the others).

    Raises:
        SettingsError: not a mapping, an unknown limit, or a value that is not a whole number
            above 0.
    """
    if not isinstance(options, Mapping):
        raise SettingsError(
            f"ctxmw.limits must be a mapping of limit names to numbers, got {options!r:.80}; "
            "for example {'conversation_notes': 100}."
        )
    return ProxyLimits(**{str(name): _count(str(name), v) for name, v in options.items()})


def _count(name: str, value: Any) -> int:
    if name not in _NAMES:
        raise SettingsError(f"ctxmw.limits.{name} is not a limit; the limits are {_NAMES!r}.")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)  # from os.environ/NAME
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SettingsError(
            f"ctxmw.limits.{name} must be a whole number above 0, got {value!r:.80}; for "
            f"example {getattr(ProxyLimits(), name)!r} (the default)."
        )
    return value


_NAMES = tuple(f.name for f in fields(ProxyLimits))
