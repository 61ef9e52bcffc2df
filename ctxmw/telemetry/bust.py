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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from ctxmw.history import DigestSlots, Extension, SlotView
from ctxmw.telemetry.prefix import common_prefix_length

__all__ = [
    "Bust",
    "CallShape",
    "PendingShape",
    "attribute_bust",
    "attribute_pending",
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
    cache: DigestSlots,
    tools: bytes,
    transcript: Sequence[Mapping[str, Any]],
    trace: Sequence[tuple[str, Sequence[Mapping[str, Any]]]] | None,
    *,
    side: bool = False,
) -> CallShape:
    """Digest a call's transcript and each traced strategy output.

    Each list is compared with the previous call's list of the same place in ``cache`` (a
    :class:`~ctxmw.history.DigestSlots`, the recorder's) and only changed messages are digested;
    ``side`` keeps a side call's (a summary's) lists apart from the agent's.
    """
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

    @property
    def transcript(self) -> list[Any]:
        """The call's transcript (the strategies' input), as copied."""
        return self._lists[-1][1]

    @property
    def stages(self) -> list[tuple[str, list[Any]]]:
        """Each traced strategy's name and output, in chain order, as copied."""
        return [(name, items) for name, (_, items) in zip(self._names, self._lists, strict=False)]

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
        return _tools_moved()
    grew = _extends(previous.transcript, current.transcript)
    extended = (
        old_name == name and _extends(old, new)
        for (old_name, old), (name, new) in zip(previous.stages, current.stages, strict=False)
    )
    moved = _moved_stage(previous.stages, current.stages, extended) if grew else None
    return _decided(grew, moved, first_diff, system)


async def attribute_pending(
    previous: PendingShape,
    current: PendingShape,
    first_diff: int | None,
    *,
    system: bool = False,
    chunk: int = _DIGEST_CHUNK,
) -> Bust:
    """:func:`attribute_bust` for two calls whose lists this process still holds (the previous
    call broke the prefix): their lists are compared by object, and only the positions whose
    object changed are digested, up to the first that differs (the loop given back every
    ``chunk`` digests)."""
    if previous.tools != current.tools:
        return _tools_moved()
    extension = Extension(chunk)
    grew = await extension.holds(previous.transcript, current.transcript)
    moved = None
    if grew:
        extended: list[bool] = []
        for (old_name, old), (name, new) in zip(previous.stages, current.stages, strict=False):
            extended.append(old_name == name and await extension.holds(old, new))
            if not extended[-1]:
                break
        moved = _moved_stage(previous.stages, current.stages, extended)
    return _decided(grew, moved, first_diff, system)


def _tools_moved() -> Bust:
    # A new dict each time: a record's bust reaches the caller's hooks, which may change it.
    return Bust(cause="tools", strategy=None, message_index=None)


def _decided(grew: bool, moved: str | None, first_diff: int | None, system: bool) -> Bust:
    """The cause, once known whether the transcript grew and which strategy's output moved."""
    if system:
        return Bust(cause="system", strategy=moved, message_index=first_diff)
    if not grew:
        return Bust(cause="transcript", strategy=None, message_index=first_diff)
    return Bust(cause="strategy", strategy=moved, message_index=first_diff)


def _moved_stage(
    previous: Sequence[tuple[str, Any]],
    current: Sequence[tuple[str, Any]],
    extended: Iterable[bool],
) -> str | None:
    """The first stage whose output stopped extending its previous output (``extended``: per
    pair of stages in order, whether it still does, up to the first that does not)."""
    for (name, _), ok in zip(current, extended, strict=False):
        if not ok:
            return name
    if len(current) > len(previous):
        return current[len(previous)][0]
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
