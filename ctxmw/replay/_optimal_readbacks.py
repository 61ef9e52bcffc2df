"""The read-backs of the optimum's schedules: where a boundary makes the next action read back.

Under a boundary, each original before it is shown full, compacted (under a read-back handle
when its header names one) or not at all. At a call point, a reference (:mod:`ctxmw.replay.loss`)
that no holder shows, but that a compacted holder with a handle points to, costs a read-back:
one more call, priced as replay prices it (:mod:`ctxmw.replay.readbacks`). So the optimum is the
cheapest schedule of the design as it is used, read-backs included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ctxmw.context.survival import message_text
from ctxmw.messages.outline import HANDLE_MARK
from ctxmw.replay.loss import Lost, ReferenceIndex
from ctxmw.replay.readbacks import readback_rounds
from ctxmw.telemetry.counters import TokenCounter

__all__ = ["Readbacks"]


class _Render(Protocol):
    """What this module reads of :class:`ctxmw.replay.optimal._Render`."""

    @property
    def cut(self) -> int: ...

    @property
    def forms(self) -> dict[int, Any]: ...

    @property
    def base(self) -> Any: ...


class Readbacks:
    """Whether, and with how many tokens, a call point reads back under a boundary's render.

    Args:
        messages: the transcript.
        points: its call points.
        renders: the transcript under each boundary state of the optimum.
        references: the transcript's references.
        counter: counts the read-back's tokens.
        model: for the counter.
        max_chars: the largest answer (``readback_max_chars``).
    """

    def __init__(
        self,
        messages: Sequence[Any],
        points: Sequence[int],
        renders: Sequence[_Render],
        references: ReferenceIndex,
        counter: TokenCounter,
        model: str,
        max_chars: int,
    ) -> None:
        self._messages, self._points, self._renders = messages, points, renders
        self._references, self._counter, self._model = references, counter, model
        self._max_chars = max_chars
        self._texts: dict[int, str] = {}
        self._sizes: dict[tuple[Any, ...], list[tuple[int, int]]] = {}

    def extra(self, t: int, j: int) -> list[tuple[int, int]] | None:
        """Per read-back call at call point ``t`` under render ``j``: (tokens it adds to the
        prompt, tokens the model writes for it); None when the next action needs none."""
        render = self._renders[j]
        if render.base is None:
            return None  # nothing compacted: nothing behind a handle
        point = self._points[t]
        wanted: list[tuple[int, str]] = []
        for text, where in self._references.references(point):
            holder = self._pointed(text, where, render)
            if holder is not None:
                wanted.append((holder, text))
        if not wanted:
            return None
        forms = {holder: render.forms[holder] for holder, _ in wanted}
        key = (point, tuple(sorted(wanted)), tuple(id(forms[h]) for h in sorted(forms)))
        found = self._sizes.get(key)
        if found is None:
            found = self._sizes[key] = self._size(point, wanted, forms)
        return found

    def _pointed(self, text: str, where: Sequence[int], render: _Render) -> int | None:
        """The holder a handle points to when no holder shows ``text``; None when one shows it
        or none points (gone: no read-back)."""
        pointed = None
        for i in where:
            if i >= render.cut:
                return None  # shown as it is
            form = render.forms.get(i)
            if form is None:
                continue  # dropped
            if form is self._messages[i] or text in self._text(form):
                return None
            content = form.get("content") if form.get("role") == "tool" else None
            if isinstance(content, str) and HANDLE_MARK in content:
                pointed = i
        return pointed

    def _text(self, form: Any) -> str:
        text = self._texts.get(id(form))
        if text is None:
            text = self._texts[id(form)] = message_text(form)
        return text

    def _size(
        self, point: int, wanted: list[tuple[int, str]], forms: dict[int, Any]
    ) -> list[tuple[int, int]]:
        lost = [Lost(text, holder, True, "compacted", holder) for holder, text in wanted]
        rounds = readback_rounds(self._messages, point, lost, forms, self._max_chars)
        count = self._counter.message_tokens
        return [(sum(count(self._model, m) for m in r), count(self._model, r[0])) for r in rounds]
