"""One offloaded tool result as stored, its handle, and how a stored form is checked on reading."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, fields

from ctxmw.errors import UsageError

__all__ = ["HANDLE", "OffloadedResult", "check_handle", "handle_for", "parse_record"]

HANDLE = re.compile(r"[0-9a-f]{16}")
"""What a handle looks like: 16 hex digits."""


@dataclass(frozen=True, slots=True)
class OffloadedResult:
    """One offloaded tool result.

    Attributes:
        handle: 16 hex digits, derived from the call id and the content.
        tool_call_id: the id of the call the result answers.
        tool_name: the tool's name.
        content: the original result text.
        preview: what the model is shown instead (frozen: the same on every call).
    """

    handle: str
    tool_call_id: str
    tool_name: str
    content: str
    preview: str

    def to_json(self) -> bytes:
        """The stored form."""
        return json.dumps(asdict(self), ensure_ascii=False).encode("utf-8", "surrogatepass")

    @classmethod
    def from_json(cls, data: bytes) -> OffloadedResult:
        """Read the stored form back."""
        return cls(**json.loads(data.decode("utf-8", "surrogatepass")))


_FIELDS = frozenset(f.name for f in fields(OffloadedResult))


def handle_for(tool_call_id: str, content: str) -> str:
    """The handle of one result: the same call id and content always give the same handle."""
    h = hashlib.sha256(tool_call_id.encode("utf-8", "surrogatepass") + b"\0")
    h.update(content.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:16]


def check_handle(handle: str) -> str:
    """``handle`` itself, if it is one.

    Raises:
        UsageError: it is not 16 hex digits.
    """
    if not HANDLE.fullmatch(handle):
        raise UsageError(f"{handle!r} is not an offload handle (16 hex digits).")
    return handle


def parse_record(data: bytes, handle: str) -> OffloadedResult | None:
    """The record stored as ``data`` under ``handle``, or None when it is not a whole one.

    Whole means: a JSON object with exactly the record's fields, all strings, naming ``handle``,
    whose content hashes to it (a cut-off or altered original is never served as the original).
    """
    try:
        value = json.loads(data.decode("utf-8", "surrogatepass"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError both
        return None
    if not isinstance(value, dict) or set(value) != _FIELDS:
        return None
    if not all(isinstance(v, str) for v in value.values()):
        return None
    record = OffloadedResult(**value)
    if record.handle != handle or handle_for(record.tool_call_id, record.content) != handle:
        return None
    return record
