"""outline: a compacted result keeps whole lines, errors and definitions first, within budget."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxmw.messages.outline import outline

SOURCE = "\n".join(
    [
        "# notes for the module",
        *[f"    x = {i} + {i}  # filler line number {i}" for i in range(40)],
        "def parse_header(raw):",
        *[f"    y = {i} * 2  # more filler {i}" for i in range(40)],
        "ValueError: bad header in src/pkg/header.py:42",
        *[f"    z = {i}" for i in range(40)],
    ]
)


def test_a_text_that_fits_is_returned_as_it_is() -> None:
    assert outline("short", 400) == "short"


def test_the_error_the_definition_and_the_first_line_survive_where_head_and_tail_would_not() -> (
    None
):
    out = outline(SOURCE, 200)
    assert out.startswith("[compacted: ")
    for kept in ("# notes for the module", "def parse_header(raw):", "src/pkg/header.py:42"):
        assert kept in out
    assert "…" in out  # omitted runs are marked


def test_kept_lines_stay_in_their_order() -> None:
    out = outline(SOURCE, 200).splitlines()[1:]
    kept = [line for line in out if line != "…"]
    positions = [SOURCE.splitlines().index(line) for line in kept]
    assert positions == sorted(positions)


def test_a_numbered_file_read_keeps_its_definitions() -> None:
    numbered = "\n".join(f"{n:>6}→{line}" for n, line in enumerate(SOURCE.splitlines(), 1))
    assert "def parse_header(raw):" in outline(numbered, 300)


def test_one_line_over_the_budget_falls_back_to_head_and_tail() -> None:
    text = "x" * 5000
    out = outline(text, 400)
    assert out.startswith("[compacted: 5000 chars")
    assert len(out) < 500


@settings(deadline=None, max_examples=60)
@given(st.text(alphabet="ab_./:\n 0123456789Edef", max_size=3000), st.integers(0, 800))
def test_never_longer_than_the_text_and_near_the_budget(text: str, limit: int) -> None:
    out = outline(text, limit)
    assert len(out) <= len(text)
    if out != text:
        # The budget, the header and at most one gap mark per kept line (plus one).
        assert len(out) <= 3 * limit + 90
