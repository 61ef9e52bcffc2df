"""Per-tool result compressors: compacted tier only, ids and status codes always survive."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

import ctxmw
from ctxmw import UsageError, shorten, validate
from ctxmw.context.compressors import apply_compressor, get_compressor, unregister
from ctxmw.settings import Settings
from ctxmw.strategies.shorten_tools_epoch import shorten_tools_epoch
from ctxmw.types import Messages, StrategyContext
from tests.transcripts import call, group

PAD = "x" * 1_000


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    yield
    for name in ("lookup", "read", "dup"):
        unregister(name)


def order_result(n: int) -> str:
    return json.dumps({"order_id": f"A{n}", "status": "shipped", "history": PAD, "notes": PAD})


def orders(n: int) -> Messages:
    msgs: Messages = [{"role": "user", "content": "check the orders"}]
    for f in range(1, n + 1):
        msgs += group([call(f"c{f}", "lookup", n=f)], [order_result(f)])
    return msgs


def test_compressors_apply_only_in_the_compacted_tier() -> None:
    seen: list[int] = []

    @ctxmw.compressor("lookup")
    def lookup(content: str, arguments: dict[str, Any]) -> str:
        seen.append(arguments["n"])
        data = json.loads(content)
        return f"order {data['order_id']}: {data['status']}"

    source = orders(51)
    prompt = shorten_tools_epoch(source, StrategyContext(settings=Settings()))
    validate(prompt)
    tools = [m for m in prompt if m["role"] == "tool"]
    originals = [m for m in source if m["role"] == "tool"]
    assert [m["content"] for m in tools[:30]] == [f"order A{f}: shipped" for f in range(1, 31)]
    assert all(new is old for new, old in zip(tools[30:], originals[30:], strict=True))
    assert sorted(seen) == list(range(1, 31))  # never called for the 21 full results


def test_a_compressor_that_drops_an_id_falls_back_to_generic_shortening(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @ctxmw.compressor("lookup")
    def careless(content: str, arguments: dict[str, Any]) -> str:
        return "status: shipped"

    content = order_result(7)
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        out = apply_compressor(content, "lookup", "{}", 400, Settings().resolved_durable_patterns)
    assert out == shorten(content, 400)
    assert "dropped 1 protected token(s)" in caplog.text
    assert "A7" not in caplog.text  # message content never reaches the logs


def test_no_compressor_or_a_short_result_means_generic_shortening() -> None:
    content = order_result(1)
    assert apply_compressor(content, "other", "{}", 400, ()) == shorten(content, 400)
    assert apply_compressor("short", "lookup", "{}", 400, ()) == "short"


def test_registration_rules() -> None:
    def first(content: str, arguments: dict[str, Any]) -> str:
        return content[:10]

    def second(content: str, arguments: dict[str, Any]) -> str:
        return content[:20]

    ctxmw.compressor("dup")(first)
    with pytest.raises(UsageError, match="already has a compressor"):
        ctxmw.compressor("dup")(second)
    ctxmw.compressor("dup", replace=True)(second)
    assert get_compressor("dup") is second
    with pytest.raises(UsageError, match="non-empty"):
        ctxmw.compressor(" ")


def test_a_compressor_must_return_text() -> None:
    @ctxmw.compressor("read")
    def broken(content: str, arguments: dict[str, Any]) -> str:
        return None  # type: ignore[return-value]

    with pytest.raises(UsageError, match="returned NoneType, expected str"):
        apply_compressor("y" * 500, "read", "{}", 400, ())
