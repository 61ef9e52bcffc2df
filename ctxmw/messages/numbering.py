"""How a tool result's lines are numbered: the numbers it shows (a file read), or positions.

A file read shows a number before each line (``cat -n``'s tab, Claude Code's ``→``,
``12:``); a read-back by line range uses those numbers, so the model asks for the lines it saw
named. Any other result's lines are counted from 1.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Numbering", "numbering"]

_NUMBERED = re.compile(r"\s*(\d+)(?:→|\t|:|\|)")
_NUMBERED_SHARE = 0.8  # of the non-blank lines, for a result to count as showing numbers


@dataclass(frozen=True, slots=True)
class Numbering:
    """How a result's lines are numbered: the number each line shows, or its position.

    Attributes:
        numbers: the number of each line (shown, or 1-based position).
        shown: True when the result itself shows the numbers (a file read): the answer then
            adds no gutter.
    """

    numbers: tuple[int, ...]
    shown: bool

    def index(self, number: int, *, last: bool) -> int:
        """The position of the first line numbered at least ``number`` (``last``: the last
        line numbered at most ``number``)."""
        nums = self.numbers
        if last:
            found = [i for i, n in enumerate(nums) if n <= number]
            return found[-1] if found else -1
        return next((i for i, n in enumerate(nums) if n >= number), len(nums))


def numbering(lines: Sequence[str]) -> Numbering:
    """The numbering of ``lines``: the numbers they show (``cat -n``, ``   12→``), if most do
    and they never go down, else their 1-based positions."""
    shown: list[int] = []
    matched = blank = 0
    previous = 0
    for line in lines:
        found = _NUMBERED.match(line)
        if found is None:
            blank += not line.strip()
            shown.append(previous)
            continue
        number = int(found.group(1))
        if number < previous:
            break
        matched += 1
        shown.append(number)
        previous = number
    else:
        if lines and matched >= _NUMBERED_SHARE * max(len(lines) - blank, 1):
            return Numbering(tuple(shown), True)
    return Numbering(tuple(range(1, len(lines) + 1)), False)
