"""shorten(s, limit) and the compacted forms of arguments and results."""

from __future__ import annotations

import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from ctxmw import shorten
from ctxmw.messages.shorten import MARKER_MAX, compact_arguments, compact_content


def test_short_strings_are_returned_unchanged() -> None:
    s = "x" * 200
    assert shorten(s, 200) is s


def test_long_string_states_length_and_md5_and_keeps_head_and_tail() -> None:
    s = "HEAD" + "m" * 15424 + "TAIL"
    out = shorten(s, 100)
    digest = hashlib.md5(s.encode()).hexdigest()[:5]
    assert out.startswith(f"[compacted: 15432 chars, md5 {digest}] HEAD")
    assert out.endswith("TAIL")
    assert "…" in out


def test_limit_is_honoured_not_ignored() -> None:
    s = "z" * 10_000
    assert len(shorten(s, 50)) < len(shorten(s, 500)) <= 500 + MARKER_MAX


def test_never_longer_than_input_when_marker_would_not_pay() -> None:
    s = "y" * 30
    assert shorten(s, 5) is s


@given(st.text(max_size=3000), st.integers(min_value=0, max_value=1500))
def test_shorten_is_bounded_and_deterministic(s: str, limit: int) -> None:
    out = shorten(s, limit)
    assert len(out) <= len(s)
    assert out == s or len(out) <= limit + MARKER_MAX
    assert shorten(s, limit) == out
    assert out == s or out.startswith(f"[compacted: {len(s)} chars, md5 ")


def test_arguments_compact_only_top_level_strings() -> None:
    args = json.dumps({"path": "p" * 500, "n": 7, "nested": {"deep": "d" * 500}})
    out = json.loads(compact_arguments(args, 50))
    assert out["path"].startswith("[compacted: 500 chars")
    assert out["n"] == 7
    assert out["nested"] == {"deep": "d" * 500}


def test_unchanged_or_malformed_arguments_are_the_same_object() -> None:
    for args in ('{"a": "short"}', "not json {", "[1, 2]"):
        fresh = "".join(args)  # an equal string that is a different object
        assert compact_arguments(fresh, 50) is fresh


def test_list_content_shortens_text_and_replaces_other_parts() -> None:
    content = [
        {"type": "text", "text": "t" * 900},
        {"type": "image_url", "image_url": {"url": "data:..."}},
        {"type": "text", "text": "short"},
    ]
    out = compact_content(content, 100)
    assert out[0]["text"].startswith("[compacted: 900 chars")
    assert out[1] == {"type": "text", "text": "[compacted: image_url part omitted]"}
    assert out[2] is content[2]
    assert content[0]["text"] == "t" * 900


def test_content_that_does_not_change_is_the_same_object() -> None:
    content = [{"type": "text", "text": "ok"}]
    assert compact_content(content, 100) is content
    assert compact_content(None, 100) is None
