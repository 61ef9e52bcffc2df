"""``Session(offload=True)``: the loop answers ``ctxmw_expand`` itself; the tools never change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ctxmw
from ctxmw.context.offload import MemoryResultStore, store_dir
from ctxmw.context.readback import READBACK_TOOL
from ctxmw.testing import FakeCompletion, text, tool_calls
from tests.test_session import MODEL

pytestmark = pytest.mark.anyio

BIG = "".join(f"row {i:05d} value={i * 7}\n" for i in range(2000))  # about 46,000 characters


def read_log() -> str:
    """Read the server log."""
    return BIG


def handle_in(content: str) -> str:
    return content.split("[ctxmw offload ", 1)[1][:16]


def expanding_agent() -> FakeCompletion:
    """Reads the log, then asks for characters 30000-30100 through ctxmw_expand, then answers."""

    def expand_call(call: dict[str, Any]) -> Any:
        handle = handle_in(call["messages"][-1]["content"])
        args = {"handle": handle, "offset": 30000, "limit": 100}
        return tool_calls(("ctxmw_expand", args))

    return FakeCompletion(tool_calls(("read_log", {})), expand_call, text("found it"))


async def test_a_retrieval_round_trip_through_the_tool_loop(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    fake = expanding_agent()
    session = ctxmw.Session(
        MODEL,
        save_file=save_file,
        tools=[read_log],
        completion=fake,
        prompt_strategies="shorten_tools_epoch_increment",
        offload=True,
    )
    reply = await session.ask("What is at character 30000 of the log?")
    assert reply.choices[0].message.content == "found it"
    # The tools block is the same on every call, the retrieval tool in it from the first one.
    assert [c["tools"] for c in fake.calls] == [fake.calls[0]["tools"]] * 3
    assert fake.calls[0]["tools"][-1] == READBACK_TOOL
    sent_result = fake.calls[1]["messages"][-1]
    assert len(sent_result["content"]) < 2000
    answer = fake.calls[2]["messages"][-1]
    assert answer["role"] == "tool"
    assert answer["content"].endswith("\n" + BIG[30000:30100])
    # Sent bytes of the offloaded result did not change between calls.
    assert fake.calls[2]["messages"][-3] == sent_result
    # The transcript keeps the full result; the original is in the store beside it.
    assert session.messages[2]["content"] == BIG
    stored = json.loads(
        (store_dir(save_file) / f"{handle_in(sent_result['content'])}.json").read_text()
    )
    assert stored["content"] == BIG


async def test_a_strategy_list_naming_offload_turns_it_on_with_a_custom_store() -> None:
    store = MemoryResultStore()
    fake = expanding_agent()
    session = ctxmw.Session(
        MODEL,
        tools=[read_log],
        completion=fake,
        prompt_strategies="offload,shorten_tools_epoch_increment",
        offload=store,
    )
    await session.ask("Read the log.")
    assert [name for name, _ in session.strategies] == ["offload", "shorten_tools_epoch_increment"]
    assert session.offload_store is store
    handle = handle_in(fake.calls[1]["messages"][-1]["content"])
    record = await store.get(handle)
    assert record is not None
    assert record.content == BIG


async def test_offload_off_sends_the_full_result_and_no_extra_tool() -> None:
    fake = FakeCompletion(tool_calls(("read_log", {})), text("ok"))
    session = ctxmw.Session(MODEL, tools=[read_log], completion=fake, prompt_strategies="none")
    await session.ask("Read the log.")
    assert fake.calls[1]["messages"][-1]["content"] == BIG
    assert [t["function"]["name"] for t in fake.calls[0]["tools"]] == ["read_log"]


def ctxmw_expand(handle: str) -> str:
    """A user tool with the reserved name."""
    return handle


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"offload": "yes"}, r"offload='yes' is not accepted"),
        ({"offload": True, "tools": [ctxmw_expand]}, r"already named 'ctxmw_expand'"),
    ],
)
async def test_bad_offload_options_are_usage_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ctxmw.UsageError, match=match):
        ctxmw.Session(MODEL, **kwargs)


async def test_a_stateless_acompletion_with_offload_answers_expand_in_its_loop(
    tmp_path: Path,
) -> None:
    fake = expanding_agent()
    reply = await ctxmw.acompletion(
        MODEL,
        [{"role": "user", "content": "Read the log."}],
        save_file=tmp_path / "agent.jsonl",
        tools=[read_log],
        completion=fake,
        prompt_strategies="none",
        offload=True,
    )
    assert reply.choices[0].message.content == "found it"
    assert fake.calls[2]["messages"][-1]["content"].endswith("\n" + BIG[30000:30100])
