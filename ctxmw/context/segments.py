"""Typed segments and a deterministic assembler: from labelled parts to an OpenAI prompt.

A :class:`Segment` is one part of a prompt: what it is (its *kind*), who controls its content
(its *trust*), whether it is the same on every call (*stable*) and how much it matters
(*priority*). :func:`assemble` orders segments by a fixed table, stable before volatile within a
kind, fits them to a token budget at segment boundaries and renders them, so the same stable
segments always give the same leading messages: a byte-identical, cacheable prefix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from ctxmw.context.tokens import TokenCounter, as_counter, count_messages
from ctxmw.errors import ContextOverflowError, UsageError
from ctxmw.types import Messages

__all__ = [
    "KIND_ORDER",
    "Assembly",
    "Segment",
    "SegmentKind",
    "Trust",
    "assemble",
    "select_segments",
]

SegmentKind = Literal["system", "tools", "examples", "retrieved", "history", "query"]
"""What a segment is."""

Trust = Literal["developer", "user", "tool", "external"]
"""Who controls a segment's content: the application's developer, the end user, a tool's
output, or a third party (web pages, documents, retrieved text)."""

KIND_ORDER: dict[str, int] = {kind: i for i, kind in enumerate(get_args(SegmentKind))}
"""The fixed order, most stable first: system, tools, examples, retrieved, history, query."""

_REQUIRED = frozenset({"system", "query"})
_SYSTEM_KINDS = frozenset({"system", "tools", "examples"})
_CLOSE_TAG = re.compile(r"</(segment)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Segment:
    """One labelled part of a prompt.

    Attributes:
        kind: system, tools, examples, retrieved, history or query. System and query segments
            are required: they are never dropped to fit a budget.
        content: text, or (for history) a list of OpenAI messages passed through untouched.
        trust: who controls the content: developer, user, tool or external.
        stable: the content is identical on every call (it belongs to the cacheable prefix).
        priority: higher is kept first when the budget is short; ties keep the table order.
        tags: topics; :func:`select_segments` keeps a segment whose tag appears in the query.
        name: a label for reports.

    Raises:
        UsageError: an unknown kind or trust, or list content outside a history segment.
    """

    kind: SegmentKind
    content: str | Messages
    trust: Trust = "developer"
    stable: bool = False
    priority: int = 0
    tags: tuple[str, ...] = ()
    name: str = ""

    def __post_init__(self) -> None:
        _check_choice("kind", self.kind, get_args(SegmentKind))
        _check_choice("trust", self.trust, get_args(Trust))
        if not isinstance(self.content, str) and self.kind != "history":
            raise UsageError(
                f"A {self.kind!r} segment needs text content, got "
                f"{type(self.content).__name__}; only history segments hold a message list."
            )

    @property
    def required(self) -> bool:
        """System and query segments are required: over budget they raise, never vanish."""
        return self.kind in _REQUIRED

    def render(self) -> Messages:
        """This segment as OpenAI messages: text is wrapped with its kind and trust."""
        if not isinstance(self.content, str):
            return list(self.content)
        role = "system" if self.kind in _SYSTEM_KINDS and self.trust == "developer" else "user"
        # Content must not be able to close its own wrapper (a prompt-injection trick).
        body = _CLOSE_TAG.sub(r"<\\/\1", self.content)
        text = f'<segment kind="{self.kind}" trust="{self.trust}">\n{body}\n</segment>'
        return [{"role": role, "content": text}]


@dataclass(frozen=True, slots=True)
class Assembly:
    """What :func:`assemble` built.

    Attributes:
        messages: the prompt, in the fixed order.
        dropped: optional segments that did not fit, in the order they were given.
        tokens: tokens of ``messages``.
        stable_prefix: how many leading messages come from stable segments only.
    """

    messages: Messages
    dropped: list[Segment] = field(default_factory=list)
    tokens: int = 0
    stable_prefix: int = 0


def assemble(
    segments: Sequence[Segment], budget_tokens: int, *, counter: TokenCounter | None = None
) -> Assembly:
    """Order, fit and render ``segments``.

    Required segments (system, query) always go in; if they alone exceed ``budget_tokens`` this
    raises. Optional segments are then admitted by priority (highest first; ties in table order);
    one that does not fit is dropped and reported, and smaller ones after it may still fit.

    Args:
        segments: the parts of the prompt, in any order.
        budget_tokens: the most tokens the rendered prompt may hold.
        counter: a :class:`~ctxmw.context.tokens.TokenCounter`; default litellm's default
            tokenizer.

    Raises:
        ContextOverflowError: the required segments do not fit the budget.
    """
    count = as_counter(counter)
    order = sorted(range(len(segments)), key=lambda i: _sort_key(segments[i], i))
    cost = {i: sum(count_messages(count, None, segments[i].render())) for i in order}
    used = sum(cost[i] for i in order if segments[i].required)
    if used > budget_tokens:
        worst = max((i for i in order if segments[i].required), key=lambda i: cost[i])
        raise ContextOverflowError(segments[worst].kind, used, budget_tokens)
    kept = {i for i in order if segments[i].required}
    by_priority = sorted((i for i in order if i not in kept), key=lambda i: -segments[i].priority)
    for i in by_priority:
        if used + cost[i] <= budget_tokens:
            kept.add(i)
            used += cost[i]
    return _render(segments, [i for i in order if i in kept], used)


def _render(segments: Sequence[Segment], kept: list[int], tokens: int) -> Assembly:
    messages: Messages = []
    stable_prefix = 0
    for i in kept:
        rendered = segments[i].render()
        if segments[i].stable and stable_prefix == len(messages):
            stable_prefix += len(rendered)
        messages += rendered
    kept_set = set(kept)
    dropped = [s for i, s in enumerate(segments) if i not in kept_set]
    return Assembly(messages, dropped, tokens, stable_prefix)


def select_segments(
    segments: Iterable[Segment], query: str | None = None, *, high_priority: int = 1
) -> list[Segment]:
    """Keep what a prompt needs: stable segments, the query, high-priority and matching items.

    A segment is kept when it is stable, is a query, has ``priority >= high_priority``, or has a
    tag that appears as a word in the query (case-insensitive). Order is preserved.

    Args:
        segments: the candidates.
        query: the text to match tags against; default: the text of the query segments.
        high_priority: the priority from which a segment is kept regardless of its tags.
    """
    items = list(segments)
    if query is None:
        texts = [s.content for s in items if s.kind == "query" and isinstance(s.content, str)]
        query = "\n".join(texts)
    words = _words(query)
    return [
        s
        for s in items
        if s.stable
        or s.kind == "query"
        or s.priority >= high_priority
        or any(_tag_matches(tag, words) for tag in s.tags)
    ]


def _sort_key(segment: Segment, index: int) -> tuple[int, int, int]:
    return KIND_ORDER[segment.kind], 0 if segment.stable else 1, index


def _check_choice(what: str, value: object, allowed: tuple[object, ...]) -> None:
    if value not in allowed:
        raise UsageError(
            f"Segment {what} {value!r} is not one of {', '.join(map(repr, allowed))}; "
            f"pass one of those."
        )


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _tag_matches(tag: str, words: set[str]) -> bool:
    tag_words = _words(tag)
    return bool(tag_words) and tag_words <= words
