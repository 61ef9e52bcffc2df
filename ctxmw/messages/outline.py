"""The line-keeping compacted form of a tool result: the lines an agent goes back for.

Head and tail keep the first and last characters of a result; in a file read or a test run the
strings the agent later needs (a function it will edit, the error it will fix, the path it will
open) sit in between. :func:`outline` keeps whole lines instead, chosen in this order until the
budget is spent: the first line, lines that report an error, lines that define something (a
function, class, module, type), lines holding a path or a ``file:line`` reference, then lines
holding any other distinctive string (:mod:`ctxmw.context.distinctive`'s definition is not
imported: it is a measure, this is a guess that keeps to cheap patterns). Kept lines appear in
their original order; each run of omitted lines becomes one ``…`` line.
"""

from __future__ import annotations

import hashlib
import re

from ctxmw.messages._memo import memoised
from ctxmw.messages.shorten import shorten

__all__ = ["outline"]

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


def outline(text: str, limit: int) -> str:
    """``text`` compacted to about ``limit`` characters of whole lines (unchanged if it fits)."""
    if len(text) <= limit:
        return text
    if max(map(len, text.splitlines()), default=0) > limit:
        return shorten(text, limit)  # one line over the budget: lines cannot be kept whole
    short = _outline(text, max(limit, 0))
    return text if short is None else short


@memoised()
def _outline(text: str, limit: int) -> str | None:
    lines = text.splitlines()
    keep = _choose(lines, limit)
    digest = hashlib.md5(text.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()
    header = f"[compacted: {len(text)} chars, md5 {digest[:5]}; {len(keep)} of {len(lines)} lines]"
    out = "\n".join([header, *_with_gaps(lines, keep)])
    return out if len(out) < len(text) else None


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


def _with_gaps(lines: list[str], keep: list[int]) -> list[str]:
    out, last = [], -1
    for i in keep:
        if i > last + 1:
            out.append(_GAP)
        out.append(lines[i])
        last = i
    if last < len(lines) - 1:
        out.append(_GAP)
    return out
