"""The strategy registry: names to callables, checked names, the unknown-name error."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ctxmw import StrategyContext, UnknownStrategyError, UsageError
from ctxmw.strategies import _registry
from ctxmw.strategies._registry import get_strategy, list_strategies, register_strategy
from ctxmw.types import Messages


@pytest.fixture
def scratch() -> Iterator[None]:
    """Registrations made by a test are forgotten after it."""
    before = dict(_registry._registry)
    yield
    _registry._registry.clear()
    _registry._registry.update(before)


def first(messages: Messages, ctx: StrategyContext) -> Messages:
    """Keep only the first message.

    More text that is not the description.
    """
    return messages[:1]


def other(messages: Messages, ctx: StrategyContext) -> Messages:
    return messages


@pytest.mark.usefixtures("scratch")
def test_a_registered_strategy_is_found_by_name_with_its_docstring_line() -> None:
    register_strategy("keep_first")(first)
    assert get_strategy("keep_first") is first
    info = next(i for i in list_strategies() if i.name == "keep_first")
    assert info.description == "Keep only the first message."


@pytest.mark.usefixtures("scratch")
def test_a_taken_name_is_refused_unless_replace() -> None:
    register_strategy("keep_first")(first)
    register_strategy("keep_first")(first)  # the same object again: harmless
    with pytest.raises(UsageError, match=r"'keep_first' is already registered"):
        register_strategy("keep_first")(other)
    register_strategy("keep_first", replace=True, description="mine")(other)
    assert get_strategy("keep_first") is other


@pytest.mark.parametrize("name", ["", " padded", "a,b", "two words", "none"])
def test_malformed_or_reserved_names_are_refused(name: str) -> None:
    with pytest.raises(UsageError):
        register_strategy(name)


def test_an_unknown_name_lists_every_registered_name() -> None:
    with pytest.raises(UnknownStrategyError) as caught:
        get_strategy("no_such_strategy")
    text = str(caught.value)
    assert "no_such_strategy" in text
    for info in list_strategies():
        assert info.name in text


def test_the_listing_is_sorted_and_holds_the_builtins() -> None:
    names = [info.name for info in list_strategies()]
    assert names == sorted(names)
    assert {"inbox", "offload", "shorten_tools_economic", "summarize"} <= set(names)
