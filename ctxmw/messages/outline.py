"""The line-keeping compacted form of a tool result: the lines an agent goes back for.

Head and tail keep the first and last characters of a result; in a file read or a test run the
strings the agent later needs (a function it will edit, the error it will fix, the path it will
open) sit in between. :func:`outline` keeps whole lines instead, chosen in this order until the
budget is spent: the first line, lines that report an error, lines that define something (a
function, class, module, type), lines holding a path or a ``file:line`` reference, then lines
holding any other distinctive string (:mod:`ctxmw.context.distinctive`'s definition is not
imported: it is a measure, this is a guess that keeps to cheap patterns). Kept lines appear in
their original order; each run of omitted lines becomes one ``…`` line.

With a read-back ``handle`` (:mod:`ctxmw.context.readback`) the header names it and each ``…``
line names the lines it stands for (``… lines 41-118``, numbered as the result numbers them),
so the model can read exactly those back.
"""

from __future__ import annotations

import hashlib
import re

from ctxmw.messages._memo import memoised
from ctxmw.messages.numbering import numbering
from ctxmw.messages.shorten import shorten

__all__ = ["HANDLE_MARK", "outline"]

HANDLE_MARK = "ctxmw_expand handle "
"""What precedes the read-back handle in a compacted result's header."""

_ERROR = re.compile(r"error|exception|traceback|failed|failure|fatal|panic|warning", re.I)
_DEFINES = re.compile(
    r"^\s*(?:\d+(?:→|:|\t)\s*)?(?:async\s+def|def|class|defp?|defmodule|defmacro|fn|pub\s+fn|func|function|"
    r"interface|struct|enum|trait|impl|module|type|export\s+(?:default\s+)?\w+|"
    r"(?:public|private|protected|static)\s+[\w<>\[\], ]+\()\b"
)
_PATH = re.compile(r"\w/[\w.-]+\.\w+|\w\.\w{1,4}:\d+")
_IDENT = re.compile(r"\b\w*(?:_\w|[a-z][A-Z]|\.\w)\w*")
_RANKS = (_ERROR, _DEFINES, _PATH, _IDENT)
_GAP = "…"


def outline(text: str, limit: int, handle: str | None = None) -> str:
    """``text`` compacted to about ``limit`` characters of whole lines (unchanged if it fits).

    Args:
        text: a tool result.
        limit: the characters of whole lines to keep.
        handle: the result's read-back handle, named in the header (None: no read-back).
    """
    if len(text) <= limit:
        return text
    if max(map(len, text.splitlines()), default=0) > limit:
        # One line over the budget: lines cannot be kept whole.
        return shorten(text, limit) if handle is None else _by_chars(text, limit, handle)
    short = _outline(text, max(limit, 0), handle)
    return text if short is None else short


@memoised()
def _outline(text: str, limit: int, handle: str | None) -> str | None:
    lines = text.splitlines()
    keep = _choose(lines, limit)
    if handle is None:
        digest = hashlib.md5(text.encode("utf-8", "surrogatepass"), usedforsecurity=False)
        header = (
            f"[compacted: {len(text)} chars, md5 {digest.hexdigest()[:5]}; "
            f"{len(keep)} of {len(lines)} lines]"
        )
        body = _with_gaps(lines, keep)
    else:
        numbers = numbering(lines).numbers
        header = (
            f"[compacted: {len(keep)} of {len(lines)} lines shown, {len(text)} chars; "
            f"{HANDLE_MARK}{handle}]"
        )
        body = _with_gaps(lines, keep, numbers)
    out = "\n".join([header, *body])
    return out if len(out) < len(text) else None


@memoised()
def _by_chars(text: str, limit: int, handle: str) -> str:
    """A result whose lines are too long to keep whole: its head and tail, with the handle."""
    keep = max(limit - len(_GAP), 0)
    head, tail = (keep + 1) // 2, keep // 2
    body = text[:head] + _GAP + (text[len(text) - tail :] if tail else "")
    header = f"[compacted: head and tail of {len(text)} chars; {HANDLE_MARK}{handle}]"
    out = f"{header}\n{body}"
    return out if len(out) < len(text) else text


def _choose(lines: list[str], limit: int) -> list[int]:
    """Indices of the lines kept, by rank then order, within ``limit`` characters."""
    ranked = sorted(range(len(lines)), key=lambda i: (_rank(lines[i], i), i))
    keep, spent = [], 0
    for i in ranked:
        cost = len(lines[i]) + 1
        if spent + cost > limit:
            continue
        keep.append(i)
        spent += cost
    return sorted(keep)


def _rank(line: str, i: int) -> int:
    if i == 0:
        return 0
    for rank, pattern in enumerate(_RANKS, start=1):
        if pattern.search(line):
            return rank
    return len(_RANKS) + 1


def _with_gaps(
    lines: list[str], keep: list[int], numbers: tuple[int, ...] | None = None
) -> list[str]:
    """The kept lines in order, each run of omitted ones as one gap line (naming the lines
    it omits when ``numbers`` are given)."""
    out, last = [], -1
    for i in [*keep, len(lines)]:
        if i > last + 1:
            out.append(_GAP if numbers is None else _gap(numbers, last + 1, i - 1))
        if i < len(lines):
            out.append(lines[i])
        last = i
    return out


def _gap(numbers: tuple[int, ...], first: int, last: int) -> str:
    a, b = numbers[first], numbers[last]
    return f"{_GAP} line {a}" if a == b else f"{_GAP} lines {a}-{b}"
