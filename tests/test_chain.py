"""prepare_prompt: every accepted form of prompt_strategies, the registry, failures."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import ctxmw
from ctxmw import (
    Aborted,
    StrategyContext,
    StrategyError,
    UnknownStrategyError,
    UsageError,
    prepare_prompt,
    register_strategy,
)
from ctxmw.strategies import _registry
from ctxmw.types import Messages

pytestmark = pytest.mark.anyio

MSGS: Messages = [{"role": "user", "content": "hi"}]


def tag(label: str) -> Any:
    def strategy(messages: Messages, ctx: StrategyContext) -> Messages:
        return [*messages, {"role": "user", "content": label}]

    strategy.__qualname__ = f"tag_{label}"
    return strategy


@pytest.fixture
def registered() -> Iterator[None]:
    """Register tag_a and tag_b for one test, then restore the registry."""
    saved = dict(_registry._registry)
    register_strategy("tag_a")(tag("a"))
    register_strategy("tag_b")(tag("b"))
    yield
    _registry._registry.clear()
    _registry._registry.update(saved)


def labels(prompt: Messages) -> list[str]:
    return [m["content"] for m in prompt[1:]]


@pytest.mark.usefixtures("registered")
async def test_comma_string_is_split_and_stripped_and_ordered() -> None:
    assert labels(await prepare_prompt(MSGS, " tag_b , ,tag_a,")) == ["b", "a"]


@pytest.mark.usefixtures("registered")
async def test_list_mixes_names_and_callables() -> None:
    assert labels(await prepare_prompt(MSGS, ["tag_a", tag("c"), "none"])) == ["a", "c"]


async def test_callable_alone() -> None:
    assert labels(await prepare_prompt(MSGS, tag("c"))) == ["c"]


async def test_none_string_disables_everything() -> None:
    out = await prepare_prompt(MSGS, "none")
    assert out == MSGS
    assert out is not MSGS


@pytest.mark.usefixtures("registered")
async def test_setting_supplies_the_list_when_none_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXMW_PROMPT_STRATEGIES", "tag_b,tag_a")
    assert labels(await prepare_prompt(MSGS)) == ["b", "a"]


@pytest.mark.usefixtures("registered")
async def test_user_list_replaces_the_default_rather_than_merging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXMW_PROMPT_STRATEGIES", "tag_b")
    assert labels(await prepare_prompt(MSGS, ["tag_a"])) == ["a"]


def test_default_list_is_the_spec_default() -> None:
    s = ctxmw.Settings()
    names = [name for name, _ in ctxmw.strategies._chain.resolve_strategies(None, s)]
    # Issue 12 made the economic schedule the default (the spec table follows the issue);
    # cache_breakpoints closes it, so a Claude session caches with no list of its own (it
    # leaves implicitly caching providers' prompts alone).
    assert names == ["shorten_tools_economic", "inbox", "cache_breakpoints"]


async def test_async_strategies_are_awaited() -> None:
    async def later(messages: Messages, ctx: StrategyContext) -> Messages:
        return [*messages, {"role": "user", "content": "async"}]

    assert labels(await prepare_prompt(MSGS, [later, tag("sync")])) == ["async", "sync"]


async def test_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(UnknownStrategyError) as info:
        await prepare_prompt(MSGS, "shorten_tool")
    assert info.value.name == "shorten_tool"
    assert "shorten_tools_epoch_increment" in str(info.value)
    assert info.value.registered == sorted(info.value.registered)


async def test_an_unknown_name_from_the_variable_names_it_suggests_and_lists_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXMW_PROMPT_STRATEGIES", "shorten_tools_economic,cache_breakpoint")
    with pytest.raises(UnknownStrategyError) as info:
        await prepare_prompt(MSGS)
    text = str(info.value)
    assert info.value.source == "the CTXMW_PROMPT_STRATEGIES variable"
    assert "'cache_breakpoint' in the CTXMW_PROMPT_STRATEGIES variable" in text
    assert "Did you mean 'cache_breakpoints'?" in text
    assert "none" in text.split("The valid names are: ")[1].split(". ")[0].split(", ")


async def test_an_unknown_name_names_the_argument_or_the_setting_it_came_from() -> None:
    with pytest.raises(UnknownStrategyError, match="in the prompt_strategies argument"):
        await prepare_prompt(MSGS, "inbox,compcat")
    with pytest.raises(UnknownStrategyError, match="in the prompt_strategies setting") as info:
        await prepare_prompt(MSGS, settings={"prompt_strategies": "compcat"})
    assert "Did you mean 'compact'?" in str(info.value)


async def test_an_unknown_name_far_from_any_suggests_nothing() -> None:
    with pytest.raises(UnknownStrategyError) as info:
        await prepare_prompt(MSGS, "zzzzzz")
    assert "Did you mean" not in str(info.value)


async def test_failing_strategy_is_named_and_chained() -> None:
    def broken(messages: Messages, ctx: StrategyContext) -> Messages:
        raise KeyError("boom")

    with pytest.raises(
        StrategyError, match=r"'test_failing_strategy_is_named_and_chained.<locals>.broken'"
    ) as info:
        await prepare_prompt(MSGS, broken)
    assert isinstance(info.value.__cause__, KeyError)


async def test_aborted_passes_through_unwrapped() -> None:
    def stop(messages: Messages, ctx: StrategyContext) -> Messages:
        raise Aborted("operator said stop")

    with pytest.raises(Aborted, match="operator said stop"):
        await prepare_prompt(MSGS, stop)


async def test_strategy_returning_a_non_list_is_an_error() -> None:
    def bad(messages: Messages, ctx: StrategyContext) -> Any:
        return tuple(messages)

    with pytest.raises(StrategyError, match="returned tuple"):
        await prepare_prompt(MSGS, bad)


async def test_strategy_appending_to_its_input_cannot_touch_the_callers_list() -> None:
    def appender(messages: Messages, ctx: StrategyContext) -> Messages:
        messages.append({"role": "user", "content": "sneaky"})
        return messages

    source = list(MSGS)
    await prepare_prompt(source, appender)
    assert source == MSGS


async def test_context_carries_save_file_model_and_settings(tmp_path: Any) -> None:
    seen: list[StrategyContext] = []

    def probe(messages: Messages, ctx: StrategyContext) -> Messages:
        seen.append(ctx)
        return messages

    await prepare_prompt(
        MSGS, probe, save_file=tmp_path / "a.jsonl", settings={"epoch_size": 3}, model="m"
    )
    assert seen[0].save_file == tmp_path / "a.jsonl"
    assert (seen[0].model, seen[0].settings.epoch_size) == ("m", 3)


@pytest.mark.parametrize("bad", ["a message", {"role": "user"}, 42])
async def test_messages_must_be_a_list(bad: Any) -> None:
    with pytest.raises(UsageError, match="messages must be a list"):
        await prepare_prompt(bad, "none")


async def test_spec_items_must_be_names_or_callables() -> None:
    with pytest.raises(UsageError, match="neither a strategy name nor a callable"):
        await prepare_prompt(MSGS, ["none", 3])  # type: ignore[list-item]


@pytest.mark.usefixtures("registered")
def test_registering_a_taken_name_is_refused() -> None:
    with pytest.raises(UsageError, match="already registered"):
        register_strategy("tag_a")(tag("other"))


@pytest.mark.parametrize("name", ["none", "a,b", "with space", ""])
def test_malformed_names_are_refused(name: str) -> None:
    with pytest.raises(UsageError):
        register_strategy(name)


def test_entry_point_plugins_are_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeEntryPoint:
        name = "plugin_strategy"
        value = "somewhere:plugin"

        def load(self) -> Any:
            return tag("plugin")

    def fake_entry_points(group: str) -> list[FakeEntryPoint]:
        assert group == "ctxmw.strategies"
        return [FakeEntryPoint()]

    saved = dict(_registry._registry)
    monkeypatch.setattr(_registry, "entry_points", fake_entry_points)
    monkeypatch.setattr(_registry, "_plugins_loaded", False)
    try:
        assert "plugin_strategy" in [info.name for info in ctxmw.list_strategies()]
        assert callable(_registry.get_strategy("plugin_strategy"))
    finally:
        _registry._registry.clear()
        _registry._registry.update(saved)


@pytest.mark.parametrize(
    "error",
    [
        ctxmw.CompactionLossError("compact", ["ORDER-1"]),
        ctxmw.ContextOverflowError("system", 10, 5),
        UsageError("bad input"),
        ctxmw.InvalidTranscriptError("orphan", 3),
    ],
    ids=lambda e: type(e).__name__,
)
async def test_ctxmw_errors_in_a_strategy_reach_the_caller_as_themselves(
    error: Exception,
) -> None:
    def refuse(messages: Messages, ctx: StrategyContext) -> Messages:
        raise error

    with pytest.raises(type(error)) as info:
        await prepare_prompt(MSGS, refuse)
    assert isinstance(info.value, StrategyError)  # `except StrategyError` still fires too
    assert info.value.__cause__ is error
    assert info.value.strategy.endswith("refuse")
    assert str(error) in str(info.value)
    for key, value in vars(error).items():
        assert getattr(info.value, key) == value or key == "strategy"


def as_litellm_messages(messages: Messages) -> list[Any]:
    from litellm.types.utils import Message

    return [Message(**m) for m in messages]


async def test_litellm_message_objects_are_compacted_like_dicts() -> None:
    from tests.transcripts import adjacent_calls

    ctxmw._litellm.load_litellm()
    source = adjacent_calls(80)
    objects = as_litellm_messages(source)
    from_objects = await prepare_prompt(objects, "shorten_tools_epoch_increment")
    from_dicts = await prepare_prompt(source, "shorten_tools_epoch_increment")
    ctxmw.validate(from_objects)
    assert len(from_objects) == len(from_dicts)
    compacted = [i for i, m in enumerate(from_dicts) if "[compacted:" in str(m)]
    assert compacted
    assert [i for i, m in enumerate(from_objects) if "[compacted:" in str(m)] == compacted
    assert [m.get("tool_call_id") for m in from_objects] == [
        m.get("tool_call_id") for m in from_dicts
    ]


async def test_repair_tool_pairs_keeps_valid_litellm_message_objects() -> None:
    from tests.transcripts import adjacent_calls

    ctxmw._litellm.load_litellm()
    objects = as_litellm_messages(adjacent_calls(12))
    assert len(objects) == 26
    repaired = await prepare_prompt(objects, "repair_tool_pairs")
    assert len(repaired) == 26
    ctxmw.validate(repaired)


async def test_strategies_see_the_names_of_the_chain() -> None:
    seen: list[tuple[str, ...]] = []

    def spy(messages: Messages, ctx: StrategyContext) -> Messages:
        seen.append(ctx.chain)
        return messages

    await prepare_prompt(MSGS, [spy, "cache_breakpoints", spy])
    assert seen == [(spy.__qualname__, "cache_breakpoints", spy.__qualname__)] * 2
