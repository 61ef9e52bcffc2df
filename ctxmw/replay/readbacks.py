"""What reading back costs in a replay, and the constant head real agents send.

**Read-backs.** At a call point whose recorded next action uses a reference that the prompt
shows only behind a read-back handle (:mod:`ctxmw.replay.loss`: *recoverable*), the model must
first call ``ctxmw_expand`` and be called again. Replay prices that as one more call at that
point per round of read-back: the same prompt, which the call before has just cached, plus the
read-back's call and its answer as new input, and the read-back call's own output tokens. The
rounds are ephemeral, as ctxmw sends them: later prompts do not carry them.

What the model reads (:func:`readback_rounds`): what each handle's header tells it to, page by
page (``readback_max_chars``), until it has what its next action needs, answered exactly as
:func:`ctxmw.context.readback.read_back` answers a real call. A long gap, or a preview that
stops far before what is needed, takes several calls.

**The head** (:func:`head_message`): real agents send a system prompt and tool definitions of
15-20k tokens on every call (Claude Code does); the recorded transcripts lack them. Replay's
``head_tokens`` puts one system message of about that many tokens before every transcript, so
ratios are taken over what a real agent pays.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxmw.context._record import handle_for
from ctxmw.context.readback import READBACK_TOOL_NAME, read_back
from ctxmw.messages.numbering import numbering
from ctxmw.replay.caching import Split
from ctxmw.replay.loss import Lost
from ctxmw.telemetry.counters import TokenCounter
from ctxmw.types import Message

__all__ = ["Readback", "head_message", "readback_rounds"]

_OFFSET = re.compile(r'"offset": (\d+)')
_GAP = re.compile(r"^… lines? (\d+)(?:-(\d+))?$", re.MULTILINE)
_MORE = re.compile(r"more from start=(\d+)")


@dataclass(frozen=True, slots=True)
class Readback:
    """The extra calls one call point paid to read back what its next action needed.

    Attributes:
        calls: how many (one per round: a round reads several handles at once, a long gap
            takes several rounds, a page each).
        prompt_tokens: tokens of the last one's prompt (the point's prompt and the read-backs).
        output_tokens: tokens of the read-back calls the model wrote.
        splits: cache reads and writes per caching model, summed over the calls.
        cost: USD per caching model, the output tokens included.
    """

    calls: int
    prompt_tokens: int
    output_tokens: int
    splits: dict[str, Split]
    cost: dict[str, float]


def readback_rounds(
    messages: Sequence[Any],
    point: int,
    lost: Sequence[Lost],
    shown: Mapping[int, Any],
    max_chars: int,
    fresh: Sequence[int] = (),
) -> list[list[Message]]:
    """The read-back rounds the model makes at ``point``, each one call and its answers.

    The model follows what each handle's header says: a compacted result's gap lines name the
    lines they omit, so it reads the gap holding what it needs, a page (``max_chars``) per
    round, from the gap's first line; an offload preview names the offset where it stops, so
    it reads pages of characters from there. Handles are read side by side, one page of each
    per round. A result the model asked for and was shown only as a preview when it arrived
    (``fresh``) is read back at once, a page from where the preview stops, whether or not
    its next action quotes it: the model has not seen what it asked for.

    Args:
        messages: the transcript.
        point: the call point.
        lost: its lost references (:meth:`~ctxmw.replay.loss.ReferenceIndex.measure`); the
            recoverable ones are read back.
        shown: what the prompt shows of each original a handle points to, by its index.
        max_chars: the largest answer (``readback_max_chars``).
        fresh: the results new at this point that the prompt shows only as a preview.
    """
    wanted: dict[int, list[str]] = {i: [] for i in fresh}
    for item in lost:
        if item.recoverable:
            wanted.setdefault(item.pointed, []).append(item.text)
    threads: list[list[tuple[str, dict[str, Any]]]] = []
    for j, texts in sorted(wanted.items()):
        content = str(messages[j]["content"])
        handle = handle_for(str(messages[j].get("tool_call_id")), content)
        form = shown.get(j)
        header = str(form.get("content", "")) if isinstance(form, Mapping) else ""
        for pages in _pages(content, handle, header, texts, max_chars):
            threads.append([(content, {"handle": handle, **page}) for page in pages])
    return [
        _round(point, r, [t[r] for t in threads if r < len(t)], max_chars)
        for r in range(max((len(t) for t in threads), default=0))
    ]


def _round(
    point: int, r: int, reads: Sequence[tuple[str, dict[str, Any]]], max_chars: int
) -> list[Message]:
    calls: list[dict[str, Any]] = []
    answers: list[Message] = []
    for k, (content, args) in enumerate(reads):
        call_id = f"ctxmw-readback-{point}-{r}-{k}"
        function = {"name": READBACK_TOOL_NAME, "arguments": json.dumps(args)}
        calls.append({"id": call_id, "type": "function", "function": function})
        answer = read_back(content, args["handle"], args, max_chars)
        answers.append({"role": "tool", "tool_call_id": call_id, "content": answer})
    return [{"role": "assistant", "content": None, "tool_calls": calls}, *answers]


def _pages(
    content: str, handle: str, header: str, texts: Sequence[str], max_chars: int
) -> list[list[dict[str, int]]]:
    """The reads of one original: a list of threads, each the pages read one after another."""
    offset = _OFFSET.search(header.split("\n", 1)[0])
    lines = content.splitlines()
    numbers = numbering(lines).numbers
    firsts = (next((i for i, line in enumerate(lines) if t in line), None) for t in texts)
    rows = sorted({i for i in firsts if i is not None})
    gaps = [(int(a), int(b or a)) for a, b in _GAP.findall(header)]
    if offset is not None or not rows or not gaps:
        start = int(offset.group(1)) if offset is not None else 0
        end = max((content.find(t) + len(t) for t in texts if t in content), default=start + 1)
        return [[{"offset": o, "limit": max_chars} for o in range(start, end, max_chars)]]
    threads = []
    for a, b in gaps:
        needed = [numbers[i] for i in rows if a <= numbers[i] <= b]
        if needed:
            threads.append(_gap_pages(content, handle, a, b, max(needed), max_chars))
    return threads or [[{"start": numbers[rows[0]], "end": numbers[rows[0]]}]]


def _gap_pages(
    content: str, handle: str, a: int, b: int, last: int, max_chars: int
) -> list[dict[str, int]]:
    """Pages of lines ``a``..``b`` from ``a`` until one holds line ``last``."""
    pages = []
    start = a
    while True:
        pages.append({"start": start, "end": b})
        more = _MORE.search(read_back(content, handle, pages[-1], max_chars).split("\n", 1)[0])
        if more is None or int(more.group(1)) > last:
            return pages
        start = int(more.group(1))


def head_message(tokens: int, counter: TokenCounter, model: str) -> Message:
    """A system message of about ``tokens`` tokens (by ``counter``): the constant head a real
    agent sends, standing in for its system prompt and tool definitions."""
    words = max(tokens, 1)
    text = _filler(words)
    for _ in range(3):  # the counter's tokens per word are not known in advance
        counted = counter.message_tokens(model, {"role": "system", "content": text})
        if counted <= 0 or abs(counted - tokens) <= max(tokens // 200, 4):
            break
        words = max(round(words * tokens / counted), 1)
        text = _filler(words)
    return {"role": "system", "content": text}


def _filler(words: int) -> str:
    vocabulary = ("agent", "tool", "file", "read", "edit", "test", "shell", "output")
    return " ".join(f"{vocabulary[i % len(vocabulary)]}" for i in range(words))
