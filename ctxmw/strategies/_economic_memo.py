"""The economic schedule's per-conversation memo: sizes and the boundary fold, resumable.

The schedule is a fold over call points: each point's decision depends only on the transcript
before it and on the fold's state after the previous point. So the memo keeps, beside the input
it was derived from, the estimated sizes (running sums per message and per call) and the fold's
state after every call point. A call re-derives only past the first message that changed (and
past a call point whose cache turned cold since); the decision itself is the strategy's own pure
``step`` function, passed in.

The states are kept as plain tuples of numbers, not :class:`FoldState` instances (why:
"Many sessions in one process" in docs/design/performance.md).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any

from ctxmw.context.tokens import CHARS_PER_TOKEN
from ctxmw.history import keep, resume, resume_point
from ctxmw.messages.pairs import ToolIndex
from ctxmw.settings import Settings

__all__ = ["CHARS_PER_TOKEN", "FoldState", "SizeTable", "resume_fold"]

_MARKER = 48  # what the compacted form adds beside the kept characters ("[compacted: ...]")


@dataclass(frozen=True, slots=True)
class FoldState:
    """The boundary fold after one call point.

    Attributes:
        boundary: completed calls before the boundary (0: none yet).
        rent: rent paid since the boundary last moved.
        moves: how many times it moved.
        previous: the boundary before the last move.
        spent: estimated cost of the prompts sent so far (USD, or input-price units).
        baseline: what sending everything (``none``) would have cost so far, estimated alike.
        sent: estimated tokens of this call point's prompt.
        plain: estimated tokens of ``none``'s prompt at this call point.
    """

    boundary: int = 0
    rent: float = 0.0
    moves: int = 0
    previous: int = 0
    spent: float = 0.0
    baseline: float = 0.0
    sent: float = 0.0
    plain: float = 0.0


@dataclass(slots=True)
class SizeTable:
    """Running sums of estimated tokens (characters / 4), extended message by message.

    ``other[i]``: what messages ``[:i]`` always show; ``full[f]`` / ``compacted[f]``: calls
    ``1..f`` shown full / compacted (a result of one of the ``whole`` tools stays full);
    ``results_at[f - 1]``: message index of call ``f``'s result. Division by four is exact in
    binary floating point, so a running sum continued from a stored value equals the sum taken
    afresh.
    """

    caps: tuple[int, int]
    whole: frozenset[str] = frozenset()
    results_at: list[int] = field(default_factory=list)
    other: list[float] = field(default_factory=lambda: [0.0])
    full: list[float] = field(default_factory=lambda: [0.0])
    compacted: list[float] = field(default_factory=lambda: [0.0])

    @classmethod
    def for_settings(cls, settings: Settings) -> SizeTable:
        """An empty table with the compacted caps of ``settings`` (the economic strategy's)."""
        result = settings.economic_compacted_result_chars or settings.short_output_length
        caps = (result + _MARKER, settings.short_string_length + _MARKER)
        return cls(caps, frozenset(settings.economic_whole_tools))

    def cut(self, start: int, calls: int) -> None:
        """Forget messages ``start..`` and calls ``calls + 1..``."""
        del self.other[start + 1 :]
        del self.results_at[calls:]
        del self.full[calls + 1 :]
        del self.compacted[calls + 1 :]

    def extend(self, messages: Sequence[Any], index: ToolIndex) -> None:
        """Add the messages and calls past those already summed."""
        other = self.other
        total = other[-1] * CHARS_PER_TOKEN
        for i in range(len(other) - 1, len(messages)):
            msg = messages[i]
            total += 4 + _chars(msg.get("content") if msg.get("role") != "tool" else None)
            other.append(total / CHARS_PER_TOKEN)
        out_cap, arg_cap = self.caps
        full, compacted = self.full[-1] * CHARS_PER_TOKEN, self.compacted[-1] * CHARS_PER_TOKEN
        for call in index.calls[len(self.results_at) :]:
            result = _chars(messages[call.result_index].get("content"))
            args = len(str(call.arguments or ""))
            # Summed as measured before: the arguments (their group comes first), then the result.
            full += 0.0 + args + result
            kept = result if call.name in self.whole else min(result, out_cap)
            compacted += 0.0 + min(args, arg_cap) + kept
            self.full.append(full / CHARS_PER_TOKEN)
            self.compacted.append(compacted / CHARS_PER_TOKEN)
            self.results_at.append(call.result_index)


@dataclass(slots=True)
class _Fold:
    """What the fold keeps between calls, beside its input (``history.keep``)."""

    table: SizeTable
    points: list[int]  # assistant call points folded so far, ascending
    states: list[tuple[Any, ...]]  # the fold after each of them, packed (:data:`_pack`)
    cold: frozenset[int]


Step = Callable[[FoldState, int], FoldState]

_pack: Callable[[FoldState], tuple[Any, ...]] = attrgetter(*(f.name for f in fields(FoldState)))


def resume_fold(
    messages: Sequence[Any],
    index: ToolIndex,
    settings: Settings,
    key: tuple[Any, ...],
    cold: Collection[int],
    memo: dict[str, Any] | None,
    slot: str,
    make_step: Callable[[SizeTable], Step],
) -> tuple[SizeTable, FoldState]:
    """The sizes of ``messages`` and the fold after its last call point (``len(messages)``).

    Args:
        messages: the transcript.
        index: its tool index.
        settings: the tiers and lengths.
        key: everything else a decision depends on (prices, limits, settings): a change
            starts the fold afresh.
        cold: call points whose cache is cold.
        memo: the conversation's memo (None: compute everything).
        slot: the memo key.
        make_step: the decision of one call point, given the sizes.
    """
    changed, kept = resume(memo, slot, messages, key)
    state = _resumed(kept, changed, messages, cold) if isinstance(kept, _Fold) else None
    if state is None:
        state = _Fold(SizeTable.for_settings(settings), [], [], frozenset())
    state.table.extend(messages, index)
    step = make_step(state.table)
    fold = FoldState(*state.states[-1]) if state.states else FoldState()
    start = state.points[-1] + 1 if state.points else 1
    for i in range(start, len(messages)):
        if messages[i].get("role") == "assistant":
            fold = step(fold, i)
            state.points.append(i)
            state.states.append(_pack(fold))
    last = step(fold, len(messages))
    state.cold = frozenset(cold)
    keep(memo, slot, messages, state, key)
    return state.table, last


def _resumed(
    kept: _Fold, changed: int, messages: Sequence[Any], cold: Collection[int]
) -> _Fold | None:
    """``kept`` cut back to what still holds for ``messages`` (unchanged up to ``changed``),
    or None."""
    start = resume_point(messages, changed)
    turned = [p for p in cold if p not in kept.cold]
    if turned:
        start = min(start, min(turned))
    if start <= 0:
        return None
    kept.table.cut(start, bisect_left(kept.table.results_at, start))
    # A point's decision reads messages[:point]: points up to the resume point still hold,
    # except one whose cache has turned cold since.
    # A point at len(messages) or past it (the new messages are a prefix of the old ones) is
    # decided afresh as this call's last point, never replayed from the memo.
    n = min(bisect_right(kept.points, start), bisect_left(kept.points, len(messages)))
    if turned and n and kept.points[n - 1] == start:
        n -= 1
    del kept.points[n:]
    del kept.states[n:]
    return kept


def _chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(str(p.get("text") or "")) if isinstance(p, dict) else 0 for p in content)
    return 0
