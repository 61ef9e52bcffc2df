"""The limit: the cheapest boundary schedule for a recorded transcript, by dynamic programming.

The schedules searched are those of ``shorten_tools_economic``'s tiers
(``economic_full_tool_calls`` full before the boundary, ``economic_compacted_tool_calls``
compacted before them): at each call point the boundary either stays or moves to the newest
completed call. Moving anywhere else never pays: for these tiers a move rewrites the prompt from
the same place whatever its target (the compaction notice, just after the head), and a later
boundary only shrinks every prompt to come and moves that place later. So a schedule is the set
of call points where the boundary moves, and the optimum is exact over all ``2^T`` of them.

State after call point ``t``: the call point ``s <= t`` of the last move (or none). The cost of
call ``t`` depends only on the state before and after it, so

    best[t][s] = best[t-1][s] + stay(t, s)                    (s < t)
    best[t][t] = min over s' of best[t-1][s'] + move(t, s')

is solved in ``O(T^2)`` steps for ``T`` call points (1,000 call points: about half a million
steps per caching model, seconds in pure Python), after rendering the transcript once per
boundary (``O(T * M)`` for ``M`` messages). A prompt over the window is allowed only where no
boundary could avoid it.

Each call is priced as the replay prices it, with real token counts of the prompts rendered as
the default renders them (its compacted lines, their read-back handles, the tools it declares):
``auto`` and ``end_breakpoint`` exactly; ``breakpoints`` as a lower bound (a move reads the whole
common prefix, as if a mark sat wherever it pays). Retention is not part of the optimum: it is
the cheapest these tiers can be, not a recommendation to show the model less.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from ctxmw.messages._memo import session_memo
from ctxmw.messages.canonical import canonical_bytes
from ctxmw.messages.pairs import index_tools
from ctxmw.replay._optimal_readbacks import Readbacks
from ctxmw.replay.caching import CACHING_MODELS, Prices
from ctxmw.replay.loss import ReferenceIndex
from ctxmw.settings import Settings
from ctxmw.strategies._epochs import apply_plan
from ctxmw.strategies.shorten_tools_economic import boundary_plan
from ctxmw.telemetry.counters import TokenCounter
from ctxmw.telemetry.rules import automatic_reads, prefix_reads
from ctxmw.types import Messages, StrategyContext

__all__ = ["Optimum", "optimal_schedule"]


@dataclass(frozen=True, slots=True)
class Optimum:
    """The cheapest schedule of one transcript (or the sum over several), per caching model.

    Attributes:
        cost: USD per caching model.
        moves: boundary moves of the cheapest schedule, per caching model.
    """

    cost: dict[str, float]
    moves: dict[str, int]

    def __add__(self, other: Optimum) -> Optimum:
        return Optimum(
            {k: self.cost[k] + other.cost[k] for k in CACHING_MODELS},
            {k: self.moves[k] + other.moves[k] for k in CACHING_MODELS},
        )


ZERO = Optimum(dict.fromkeys(CACHING_MODELS, 0.0), dict.fromkeys(CACHING_MODELS, 0))


@dataclass(frozen=True, slots=True)
class _Render:
    """The transcript under one boundary: its changed head, then the unchanged originals.

    Attributes:
        keys: a key per prompt message of the head (equal keys: equal canonical bytes).
        anchors: original index of each head message (the notice: the next message's).
        cumulative: ``cumulative[j]`` = tokens of the first ``j`` head messages.
        cut: original index where the unchanged tail starts.
        base: the transcript as it is, which holds the tail (None: this is it).
        forms: what the head shows of each original before ``cut``, by original index (an
            original it drops is absent): what a read-back needs to know.
    """

    keys: list[int]
    anchors: list[int]
    cumulative: list[int]
    cut: int
    base: _Render | None = None
    forms: dict[int, Any] = field(default_factory=dict)

    def length(self, point: int) -> int:
        """Prompt messages sent at ``point`` (``messages[:point]``)."""
        if self.base is None or point <= self.cut:
            return bisect_left(self.anchors, point)
        return len(self.keys) + point - self.cut

    def tokens(self, j: int) -> int:
        """Tokens of the first ``j`` prompt messages."""
        head = len(self.keys)
        if self.base is None or j <= head:
            return self.cumulative[j]
        tail = self.base.cumulative
        return self.cumulative[head] + tail[self.cut + j - head] - tail[self.cut]

    def key(self, j: int) -> int:
        """The key of prompt message ``j``."""
        head = len(self.keys)
        if self.base is None or j < head:
            return self.keys[j]
        return self.base.keys[self.cut + j - head]

    @property
    def size(self) -> int:
        """Prompt messages of the whole transcript."""
        return len(self.keys) + (len(self.base.keys) - self.cut if self.base else 0)


def optimal_schedule(
    messages: Messages,
    points: Sequence[int],
    *,
    model: str,
    prices: Prices,
    counter: TokenCounter,
    settings: Settings,
    window: int,
    minimum: int,
    tools: Sequence[Mapping[str, Any]] | None = None,
    references: ReferenceIndex | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Optimum:
    """The cheapest boundary schedule of ``messages`` over its call ``points``.

    Args:
        messages: the transcript.
        points: its call points (``messages[:p]`` was sent), ascending.
        model: the model, for the counter.
        prices: input, cache-read and cache-write prices.
        counter: counts tokens (share the replay's, so the figures compare).
        settings: the tiers (``economic_full_tool_calls``, ``economic_compacted_tool_calls``).
        window: prompts over it are allowed only where every boundary exceeds it.
        minimum: the breakpoint models' smallest cached prompt.
        tools: the tool definitions leading every prompt.
        references: the transcript's references: a call point whose next action needs what a
            boundary shows only behind a read-back handle pays the read-back call there
            (:mod:`ctxmw.replay.readbacks`); None prices no read-back.
        progress: called with ``(done, of)`` after each boundary is rendered (most of the
            time goes there).
    """
    if not points:
        return ZERO
    builder = _Builder(messages, model, counter, settings)
    index = builder.index
    results = [c.result_index for c in index.calls]
    boundaries = [0, *(bisect_left(results, p) for p in points)]
    renders = []
    # One memo for every boundary's render: a result compacted under one boundary is compacted
    # alike under the next, so its shortened text is computed once.
    with session_memo({}):
        for boundary in boundaries:
            renders.append(builder.render(boundary))
            if progress is not None:
                progress(len(renders), len(boundaries))
    tools_tokens = counter.tools_tokens(model, tools, _has_system(messages)) if tools else 0
    fixed = (tools_tokens, counter.overhead_tokens(model))
    readbacks = None
    if references is not None:
        chars = settings.readback_max_chars
        readbacks = Readbacks(messages, points, renders, references, counter, model, chars)
    best = _Solver(renders, points, fixed, window, readbacks).solve(prices, minimum)
    return Optimum({k: v[0] for k, v in best.items()}, {k: v[1] for k, v in best.items()})


def _has_system(messages: Messages) -> bool:
    return any(m.get("role") == "system" for m in messages)


class _Builder:
    """Renders the transcript under a boundary, counting each distinct message once."""

    def __init__(
        self, messages: Messages, model: str, counter: TokenCounter, settings: Settings
    ) -> None:
        self.messages, self.model, self.counter, self.settings = messages, model, counter, settings
        self.index = index_tools(messages)
        self._origin = {id(m): i for i, m in enumerate(messages)}
        self._by_call = {c.id: c.result_index for c in self.index.calls}
        for i in self.index.groups:
            for tc in messages[i]["tool_calls"]:
                if isinstance(tc, dict) and tc.get("id") is not None:
                    self._by_call.setdefault(f"group:{tc['id']}", i)
        self._keys: dict[bytes, int] = {}
        self._tokens: dict[int, int] = {}
        self._original: dict[int, tuple[int, int]] = {}  # index -> (key, tokens)
        self._cache: dict[int, _Render] = {}

    def render(self, boundary: int) -> _Render:
        if boundary <= self.settings.economic_full_tool_calls:
            boundary = 0  # nothing is compacted yet: the transcript as it is
        if boundary not in self._cache:
            self._cache[boundary] = self._render(boundary)
        return self._cache[boundary]

    def _render(self, boundary: int) -> _Render:
        n = len(self.index.calls)
        if boundary == 0:
            out: Messages = list(self.messages)
            cut, base = len(self.messages), None
        else:
            # Past the result of call ``boundary`` every message is the original (full) one.
            cut, base = self.index.calls[boundary - 1].result_index + 1, self.render(0)
            ctx = StrategyContext(settings=self.settings)
            plan = boundary_plan(n, boundary, 0, 1, self.settings)
            s = self.settings
            out = apply_plan(
                self.messages[:cut],
                self.index,
                plan,
                ctx,
                "optimal",
                lines=s.economic_compacted_result_chars,
                handles=s.readback,
                whole=s.economic_whole_tools,
            )
        keys, anchors, tokens = [], [], []
        forms: dict[int, Any] = {}
        pending = cut  # the compaction notice takes the index of the message after it
        for msg in reversed(out):
            origin = self._anchor(msg)
            if origin is None:
                origin = pending
            elif base is not None:
                forms[origin] = msg
            pending = origin
            key, count = self._measure(msg, self._origin.get(id(msg)))
            keys.append(key)
            anchors.append(origin)
            tokens.append(count)
        keys.reverse()
        anchors.reverse()
        tokens.reverse()
        return _Render(keys, anchors, list(accumulate(tokens, initial=0)), cut, base, forms)

    def _anchor(self, msg: Any) -> int | None:
        i = self._origin.get(id(msg))
        if i is not None:
            return i
        if msg.get("role") == "tool":
            return self._by_call.get(msg.get("tool_call_id"))
        calls = msg.get("tool_calls") or ()
        first = calls[0] if calls and isinstance(calls[0], dict) else {}
        return self._by_call.get(f"group:{first.get('id')}")

    def _measure(self, msg: Any, original: int | None) -> tuple[int, int]:
        if original is not None and original in self._original:
            return self._original[original]
        raw = canonical_bytes(msg)
        key = self._keys.setdefault(raw, len(self._keys))
        if key not in self._tokens:
            self._tokens[key] = self.counter.message_tokens(self.model, msg)
        if original is not None:
            self._original[original] = (key, self._tokens[key])
        return key, self._tokens[key]


class _Solver:
    """The dynamic programme over call points (see the module docstring)."""

    def __init__(
        self,
        renders: list[_Render],
        points: Sequence[int],
        fixed: tuple[int, int],
        window: int,
        readbacks: Readbacks | None = None,
    ) -> None:
        # State j: the last move was at call point j - 1 (j = 0: never moved); render j.
        self.renders, self.points = renders, points
        self.tools, self.overhead = fixed
        self.window = window
        self.readbacks = readbacks
        self._diffs: dict[tuple[int, int], int] = {}

    def solve(self, prices: Prices, minimum: int) -> dict[str, tuple[float, int]]:
        """(cost, moves) of the cheapest schedule, per caching model."""
        bodies = [self._body(r, 0) for r in self.renders[:2]]
        best = {
            k: [
                _price(k, prices, minimum, b + self.overhead, b, 0, False)
                + self._readback(k, prices, minimum, 0, j, b)
                for j, b in enumerate(bodies)
            ]
            for k in CACHING_MODELS
        }
        moves = {k: [0, 1] for k in CACHING_MODELS}
        for t in range(1, len(self.points)):
            previous = bodies
            bodies = [self._body(self.renders[j], t) for j in range(t + 2)]
            moved = [self._moved(t, j, previous[j], bodies[t + 1]) for j in range(t + 1)]
            over = [self._over(t, j, bodies) for j in range(t + 1)]
            for k in CACHING_MODELS:
                row, count = best[k], moves[k]
                stay = [
                    math.inf
                    if over[j]
                    else row[j]
                    + _price(
                        k, prices, minimum, bodies[j] + self.overhead, bodies[j], previous[j], True
                    )
                    + self._readback(k, prices, minimum, t, j, bodies[j])
                    for j in range(t + 1)
                ]
                prompt = bodies[t + 1] + self.overhead
                cost, parent = min(
                    (row[j] + _price(k, prices, minimum, prompt, bodies[t + 1], *moved[j]), j)
                    for j in range(t + 1)
                )
                cost += self._readback(k, prices, minimum, t, t + 1, bodies[t + 1])
                best[k] = [*stay, cost]
                moves[k] = [*count, count[parent] + 1]
        result = {}
        for k in CACHING_MODELS:
            total, j = min((c, j) for j, c in enumerate(best[k]))
            result[k] = (total, moves[k][j])
        return result

    def _readback(self, key: str, prices: Prices, minimum: int, t: int, j: int, body: int) -> float:
        """The read-back calls at call point ``t`` in state ``j`` (0.0 when none is needed):
        each reads the prompt before it from the cache, writes its round and the model's call
        is output."""
        rounds = self.readbacks.extra(t, j) if self.readbacks is not None else None
        cost = 0.0
        for added, output in rounds or ():
            cost += _price(
                key, prices, minimum, body + added + self.overhead, body + added, body, True
            )
            cost += output * prices.output
            body += added
        return cost

    def _body(self, r: _Render, t: int) -> int:
        return self.tools + r.tokens(r.length(self.points[t]))

    def _moved(self, t: int, j: int, prev_body: int, body: int) -> tuple[int, bool]:
        """The prefix a move at ``t`` from state ``j`` shares, and whether it extends."""
        prev, cur = self.renders[j], self.renders[t + 1]
        prev_len = prev.length(self.points[t - 1])
        common = self._common(j, t + 1, prev_len, cur.length(self.points[t]))
        return self.tools + prev.tokens(common), common == prev_len

    def _over(self, t: int, j: int, bodies: list[int]) -> bool:
        """Staying in state ``j`` sends a prompt over the window that moving would avoid."""
        return (
            bodies[j] + self.overhead > self.window
            and bodies[t + 1] + self.overhead <= self.window
            and self.renders[j] is not self.renders[t + 1]
        )

    def _common(self, a: int, b: int, len_a: int, len_b: int) -> int:
        ra, rb = self.renders[a], self.renders[b]
        if ra is rb:
            return min(len_a, len_b)
        pair = (id(ra), id(rb))
        if pair not in self._diffs:
            j, stop = 0, min(ra.size, rb.size)
            while j < stop and ra.key(j) == rb.key(j):
                j += 1
            self._diffs[pair] = j
        return min(self._diffs[pair], len_a, len_b)


def _price(
    key: str, prices: Prices, minimum: int, prompt: int, body: int, prefix: int, extends: bool
) -> float:
    if key == "auto":
        reads = automatic_reads(prefix)
        return reads * prices.cache_read + (prompt - reads) * prices.input
    # breakpoints: a lower bound (the common prefix is read whole); end_breakpoint: exact.
    readable = extends or key == "breakpoints"
    reads = prefix_reads(prefix, minimum) if readable else 0
    writes = body - reads if body >= minimum else 0
    plain = prompt - reads - writes
    return reads * prices.cache_read + writes * prices.cache_write + plain * prices.input
