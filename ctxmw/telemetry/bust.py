"""Bust attribution: when the reusable prefix shrank, say what moved it.

A call *busts* when the previous call's payload is not a prefix of this one. The cause is,
checked in this order:

1. ``tools``: the tools list changed (it precedes every message, so everything after it moved);
2. ``system``: the first message that differs is a system (or developer) message: the system
   prompt moved, whoever moved it (``strategy`` names the strategy when the caller's transcript
   only grew);
3. ``transcript``: the caller's own transcript (the strategies' input) is not an extension of
   the previous one (an edited or removed message);
4. ``strategy``: the first strategy, in chain order, whose output stopped extending its previous
   output; ``strategy`` names it (None when no trace was given or nothing traced moved, i.e.
   something after the chain changed the payload).

``message_index`` is the index, in the payload as sent, of the first message that differs from
the previous call's payload (None for ``tools``: the break is before the first message).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from ctxmw.history import DigestSlots, SlotView
from ctxmw.messages.canonical import DigestCache
from ctxmw.telemetry.prefix import common_prefix_length

__all__ = [
    "Bust",
    "CallShape",
    "PendingShape",
    "attribute_bust",
    "call_shape",
    "shape_from_json",
    "shape_to_json",
]

# Messages digested per loop step when a shape is resolved (a few milliseconds of serialising).
_DIGEST_CHUNK = 256


class Bust(TypedDict):
    """The ledger's ``bust`` value."""

    cause: str
    strategy: str | None
    message_index: int | None


@dataclass(frozen=True, slots=True)
class CallShape:
    """Digests of what one call was built from.

    Attributes:
        tools: digest of the tools list.
        transcript: per-message digests of the caller's transcript (the strategies' input).
        stages: ``(strategy name, per-message digests of its output)``, in chain order.
    """

    tools: bytes
    transcript: list[bytes]
    stages: list[tuple[str, list[bytes]]]


def call_shape(
    cache: DigestSlots | DigestCache,
    tools: bytes,
    transcript: Sequence[Mapping[str, Any]],
    trace: Sequence[tuple[str, Sequence[Mapping[str, Any]]]] | None,
    *,
    side: bool = False,
) -> CallShape:
    """Digest a call's transcript and each traced strategy output.

    With :class:`~ctxmw.history.DigestSlots` (the recorder's) each list is compared
    with the previous call's list of the same place and only changed messages are digested;
    ``side`` keeps a side call's (a summary's) lists apart from the agent's.
    """
    if isinstance(cache, DigestCache):
        stages = [(name, cache.digests(output)) for name, output in trace or ()]
        return CallShape(tools, cache.digests(transcript), stages)
    return PendingShape(cache, tools, transcript, trace, side=side).resolve_now(cache)


class PendingShape:
    """A call's lists, digested into its :class:`CallShape` only when a bust is attributed
    (or the state exported): a call whose prefix held digests none of them.

    The lists are copied (a caller may extend its own in place before the next call) and their
    slots kept in ``cache`` (see :meth:`~ctxmw.history.DigestSlots.keep`), so that a
    late digest compares each list with the slot's last view and serialises only what changed.
    """

    __slots__ = ("_lists", "_names", "_shape", "tools")

    def __init__(
        self,
        cache: DigestSlots,
        tools: bytes,
        transcript: Sequence[Mapping[str, Any]],
        trace: Sequence[tuple[str, Sequence[Mapping[str, Any]]]] | None,
        *,
        side: bool = False,
    ) -> None:
        self.tools = tools
        # One copy per list object: a strategy that passes its input on hands the same list on.
        copies: dict[int, list[Any]] = {}
        self._lists = [
            (slot, copies.get(id(items)) or copies.setdefault(id(items), list(items)))
            for slot, items in _slots(transcript, trace, side)
        ]
        self._names = [name for name, _ in trace or ()]
        self._shape: CallShape | None = None
        for slot, _ in self._lists:
            cache.keep(slot)

    async def resolve(self, cache: DigestSlots, chunk: int = _DIGEST_CHUNK) -> CallShape:
        """The shape, digested now if not yet (giving the loop back every ``chunk`` messages)."""
        if self._shape is None:
            views = [await cache.digests_chunked(slot, items, chunk) for slot, items in self._lists]
            self._shape = self._built(views)
        return self._shape

    def resolve_now(self, cache: DigestSlots) -> CallShape:
        """:meth:`resolve` in one go (an export between calls)."""
        if self._shape is None:
            self._shape = self._built([cache.digests(slot, items) for slot, items in self._lists])
        return self._shape

    def _built(self, views: Sequence[SlotView]) -> CallShape:
        *stages, whole = views
        pairs = [(n, v.digests) for n, v in zip(self._names, stages, strict=True)]
        return CallShape(self.tools, whole.digests, pairs)


def _slots(
    transcript: Sequence[Mapping[str, Any]],
    trace: Sequence[tuple[str, Sequence[Mapping[str, Any]]]] | None,
    side: bool,
) -> list[tuple[str, Sequence[Mapping[str, Any]]]]:
    """Each list of a call with its slot name: the strategies' outputs, then the transcript."""
    where = "side:" if side else ""
    stages = [(f"{where}stage:{i}:{name}", out) for i, (name, out) in enumerate(trace or ())]
    return [*stages, (f"{where}transcript", transcript)]


def attribute_bust(
    previous: CallShape | None,
    current: CallShape,
    first_diff: int | None,
    broke: bool,
    *,
    system: bool = False,
) -> Bust | None:
    """Name the cause of a bust, or return None when the prefix did not shrink.

    Args:
        previous: the previous call's shape (None on a session's first call).
        current: this call's shape.
        first_diff: index of the first payload message that differs from the previous payload.
        broke: whether the previous payload is not a prefix of this one.
        system: the first differing payload message is a system or developer message.
    """
    if previous is None or not broke:
        return None
    if previous.tools != current.tools:
        return Bust(cause="tools", strategy=None, message_index=None)
    grew = _extends(previous.transcript, current.transcript)
    if system:
        moved = _moved_stage(previous, current) if grew else None
        return Bust(cause="system", strategy=moved, message_index=first_diff)
    if not grew:
        return Bust(cause="transcript", strategy=None, message_index=first_diff)
    return Bust(
        cause="strategy", strategy=_moved_stage(previous, current), message_index=first_diff
    )


def _moved_stage(previous: CallShape, current: CallShape) -> str | None:
    for (old_name, old), (name, new) in zip(previous.stages, current.stages, strict=False):
        if old_name != name or not _extends(old, new):
            return name
    if len(current.stages) > len(previous.stages):
        return current.stages[len(previous.stages)][0]
    return None


def _extends(old: Sequence[bytes], new: Sequence[bytes]) -> bool:
    return len(new) >= len(old) and common_prefix_length(old, new) == len(old)


def shape_to_json(shape: CallShape) -> dict[str, Any]:
    """A shape as JSON-ready data (digests in hex)."""
    return {
        "tools": shape.tools.hex(),
        "transcript": [d.hex() for d in shape.transcript],
        "stages": [[name, [d.hex() for d in digests]] for name, digests in shape.stages],
    }


def shape_from_json(data: Mapping[str, Any]) -> CallShape:
    """The shape :func:`shape_to_json` wrote."""
    return CallShape(
        bytes.fromhex(data["tools"]),
        [bytes.fromhex(d) for d in data["transcript"]],
        [(str(name), [bytes.fromhex(d) for d in digests]) for name, digests in data["stages"]],
    )
