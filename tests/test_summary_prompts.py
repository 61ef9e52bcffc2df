"""The texts summarize sends: their placeholders, the aligned mark, the anchored headings."""

from __future__ import annotations

from string import Formatter

from ctxmw.strategies._summary_prompts import (
    ALIGNED_MARK,
    ALIGNED_PROMPT,
    EARLIER,
    SUMMARY_PROMPT,
)


def fields(template: str) -> set[str]:
    return {name for _, name, _, _ in Formatter().parse(template) if name is not None}


def test_each_template_takes_exactly_the_fields_summarize_fills() -> None:
    assert fields(SUMMARY_PROMPT) == {"items"}
    assert fields(ALIGNED_PROMPT) == {"kept", "earlier", "items"}
    assert fields(EARLIER) == set()


def test_the_aligned_instruction_starts_with_its_mark_and_names_every_heading() -> None:
    text = ALIGNED_PROMPT.format(kept=2, earlier=EARLIER, items="- ORD-1")
    assert text.startswith(ALIGNED_MARK)
    for heading in ("## Intent", "## Decisions", "## Files", "## Open items", "## Identifiers"):
        assert heading in text
    assert "- ORD-1" in text
    assert "carry its content forward" in text
    assert "{" not in text
