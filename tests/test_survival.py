"""Durable items and lines, the literal survival check, and the tokens compressors must keep."""

from __future__ import annotations

import json

from ctxmw.context.survival import (
    DEFAULT_DURABLE_PATTERNS,
    durable_items,
    durable_lines,
    message_text,
    missing_items,
    protected_tokens,
)

P = DEFAULT_DURABLE_PATTERNS


def test_decision_open_and_error_lines_are_durable_whole() -> None:
    text = (
        "chatter\nDECISION: ship today\n  OPEN: ask about size\nERROR: timeout\nDECISIONS are fun"
    )
    assert durable_items(text, P) == (
        "DECISION: ship today",
        "OPEN: ask about size",
        "ERROR: timeout",
    )


def test_identifiers_amounts_and_tracking_numbers_are_durable() -> None:
    text = "ORD-1042 (#884213) cost $1,250.00 or 42.50 EUR; 1Z999AA10123456784, RA123456789DE"
    assert set(durable_items(text, P)) == {
        "ORD-1042",
        "#884213",
        "$1,250.00",
        "42.50 EUR",
        "1Z999AA10123456784",
        "RA123456789DE",
    }


def test_ordinary_text_has_no_durable_items() -> None:
    assert durable_items("We looked at 3 files and decided nothing in 2024.", P) == ()


def test_durable_lines_are_the_lines_holding_an_item() -> None:
    text = "a\nrefund $5.00 now\nb\nERROR: x"
    assert durable_lines(text, P) == ("refund $5.00 now", "ERROR: x")


def test_the_survival_check_is_literal() -> None:
    assert missing_items(["ORD-1042", "$5.00"], "kept ORD-1042 and 5.00") == ["$5.00"]


def test_message_text_reads_content_parts_and_arguments() -> None:
    msg = {
        "role": "assistant",
        "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {}}],
        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": '{"id": "ORD-7777"}'}}],
    }
    assert message_text(msg) == 'hi\n{"id": "ORD-7777"}'


def test_protected_tokens_from_json_keys_and_text() -> None:
    data = {"order_id": "A7", "status": "shipped", "items": [{"sku_id": 12, "ok": True}], "code": 0}
    assert set(protected_tokens(json.dumps(data), ())) == {"A7", "shipped", "12", "0"}
    assert set(protected_tokens("request id: r-9 finished, status=503", ())) == {"r-9", "503"}
