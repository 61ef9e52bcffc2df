"""What the compaction notice says: what was shortened or removed, why, and how to get it back.

The notice (the ``compaction_notice`` setting) is inserted before the first tool group a
shortening strategy kept. Beside the counts (``{compacted}``, ``{dropped}``) it states the
reason (``{reason}``) and whether anything can be read back (``{recover}``), each decided when
the boundary moves, so the notice's bytes change only with the prompt's prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

__all__ = ["REASONS", "RECOVER", "Reason", "Recovery", "notice_fields", "offloads_before"]

Reason = Literal["cost", "window"]
Recovery = Literal["readback", "offload", "none"]
"""How shortened content comes back: by the handles of compacted results, by offload
previews' handles, or not at all."""

REASONS: dict[Reason, str] = {
    "cost": "To save cost (every call sends the whole conversation again)",
    "window": "To fit the context window",
}
"""How the notice opens, per reason."""

RECOVER: dict[Recovery, str] = {
    "readback": "A compacted result shows some of its lines under a header naming a handle: "
    'ctxmw_expand reads any of its lines back exactly ({"handle": "...", "start": 120, "end": '
    '180}, or "pattern": "text to find"). A removed result cannot be read back: if you need it, '
    "run the tool again.",
    "offload": "A compacted result that shows a '[ctxmw offload HANDLE: ...' line can be read "
    "back in full: call ctxmw_expand with that handle. A removed result cannot be read back: if "
    "you need it, run the tool again.",
    "none": "Compacted and removed content cannot be read back from this conversation: if you "
    "need the exact text of an older result, run the tool again.",
}
"""What the notice says about getting content back."""


def notice_fields(reason: Reason, recovery: Recovery) -> dict[str, str]:
    """The ``{reason}`` and ``{recover}`` fields of the notice."""
    return {"reason": REASONS[reason], "recover": RECOVER[recovery]}


def offloads_before(chain: Sequence[str], name: str) -> bool:
    """Whether ``offload`` runs before strategy ``name`` in the chain (its handles survive)."""
    return "offload" in chain and (name not in chain or chain.index("offload") < chain.index(name))
