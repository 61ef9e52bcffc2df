"""The ``offload`` strategy and its store: shrunk once, frozen, owner-only, readable back."""

from __future__ import annotations

import copy
import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxmw
from ctxmw import Settings, validate
from ctxmw.context import compressors
from ctxmw.context.offload import (
    FileResultStore,
    MemoryResultStore,
    OffloadedResult,
    handle_for,
    store_dir,
)
from ctxmw.context.readback import READBACK_TOOL, answer
from ctxmw.strategies import offload as offload_strategy
from ctxmw.strategies.offload import Offload
from ctxmw.types import Messages, StrategyContext
from tests.transcripts import call, call_points, group, quarter_counter, transcripts

THRESHOLD = 100  # tokens: with quarter_counter, results over about 400 characters
BIG = "".join(f"line {i:04d}: some tool output\n" for i in range(200))  # 5,600 characters


def options(**extra: Any) -> Settings:
    return Settings(offload_threshold=THRESHOLD, offload_preview_chars=200, **extra)


def history(*outputs: str, name: str = "read") -> Messages:
    msgs: Messages = [{"role": "user", "content": "Look around."}]
    for i, out in enumerate(outputs):
        msgs += group([call(f"c{i}", name, path=f"f{i}")], [out])
    return msgs


def run(messages: Messages, ctx: StrategyContext, store: Any = None) -> Messages:
    strategy = Offload(store=store, counter=quarter_counter)
    return anyio.run(strategy, messages, ctx)


@pytest.fixture
def store() -> MemoryResultStore:
    return MemoryResultStore()


def test_a_large_result_becomes_a_preview_with_a_handle(store: MemoryResultStore) -> None:
    msgs = history("small", BIG)
    before = copy.deepcopy(msgs)
    ctx = StrategyContext(settings=options())
    out = run(msgs, ctx, store)
    validate(out)
    assert msgs == before
    assert out[2] is msgs[2]  # the small result, untouched, the same object
    shown = out[4]
    assert shown["tool_call_id"] == "c1"
    assert shown["role"] == "tool"
    handle = handle_for("c1", BIG)
    header, body = shown["content"].split("\n", 1)
    assert header.startswith(f"[ctxmw offload {handle}: ")
    assert f'ctxmw_expand with {{"handle": "{handle}", "offset": 200, "limit": 8000}}' in header
    assert "5600 characters" in header
    assert body == BIG[:200]
    assert ctx.stats["offload"]["offloaded"] == 1
    record = anyio.run(store.get, handle)
    assert record is not None
    assert record.content == BIG
    assert record.preview == shown["content"]


def test_tail_preview_and_unknown_keys_survive(store: MemoryResultStore) -> None:
    msgs = history(BIG)
    msgs[2] = {**msgs[2], "name": "read", "cache_control": {"type": "ephemeral"}}
    out = run(msgs, StrategyContext(settings=options(offload_preview="tail")), store)
    assert out[2]["content"].endswith(BIG[-200:])
    assert "from offset 5400" in out[2]["content"]
    assert out[2]["cache_control"] == {"type": "ephemeral"}
    assert out[2]["name"] == "read"


def test_a_registered_compressor_makes_the_preview(store: MemoryResultStore) -> None:
    def lines(content: str, arguments: dict[str, Any]) -> str:
        return f"{content.count(chr(10))} lines from {arguments['path']}"

    compressors.compressor("count_lines")(lines)
    try:
        out = run(history(BIG, name="count_lines"), StrategyContext(settings=options()), store)
    finally:
        compressors.unregister("count_lines")
    assert out[2]["content"].endswith("\n200 lines from f0")
    assert "compressor" in out[2]["content"].split("\n", 1)[0]


def test_results_of_the_expand_tool_are_never_offloaded(store: MemoryResultStore) -> None:
    out = run(history(BIG, name="ctxmw_expand"), StrategyContext(settings=options()), store)
    assert out[2]["content"] == BIG


def test_the_preview_is_frozen_even_if_the_settings_change(store: MemoryResultStore) -> None:
    msgs = history(BIG)
    first = run(msgs, StrategyContext(settings=options()), store)
    later = run(msgs, StrategyContext(settings=options(offload_preview="tail")), store)
    assert later[2]["content"] == first[2]["content"]


def test_without_any_store_results_are_sent_unchanged_with_a_warning_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(offload_strategy, "_warned", set())
    msgs = history(BIG, BIG + "more")
    out = run(msgs, StrategyContext(settings=options()))
    assert out is msgs
    assert run(msgs, StrategyContext(settings=options())) is msgs
    assert caplog.text.count("nowhere to keep") == 1


def test_the_file_store_sits_beside_the_save_file_and_is_owner_only(tmp_path: Path) -> None:
    save_file = tmp_path / "runs" / "agent.jsonl"
    old = os.umask(0)
    try:
        run(history(BIG), StrategyContext(settings=options(), save_file=save_file))
    finally:
        os.umask(old)
    folder = store_dir(save_file)
    assert folder == tmp_path / "runs" / "agent.jsonl.offload"
    files = list(folder.iterdir())
    assert [f.name for f in files] == [f"{handle_for('c0', BIG)}.json"]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert json.loads(files[0].read_text())["content"] == BIG


def test_the_file_store_reads_back_and_keeps_the_first_record(tmp_path: Path) -> None:
    store = FileResultStore(tmp_path / "s")
    first = OffloadedResult(handle_for("c", "original"), "c", "read", "original", "preview")

    async def main() -> tuple[Any, Any, Any]:
        await store.put(first)
        await store.put(OffloadedResult(first.handle, "c", "read", "other", "other"))
        return await store.get(first.handle), await store.get("0" * 16), await store.get("../x")

    assert anyio.run(main) == (first, None, None)
    assert not [p for p in (tmp_path / "s").iterdir() if p.name.startswith(".")]  # no temp left


def test_store_dir_follows_the_whole_file_name() -> None:
    assert store_dir("d/a.b.jsonl") == Path("d/a.b.jsonl.offload")
    assert store_dir("d/agent") == Path("d/agent.offload")
    assert store_dir("d/agent.json") != store_dir("d/agent.jsonl")


def expand_call(arguments: dict[str, Any] | str, id_: str = "x1") -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id_, "type": "function", "function": {"name": "ctxmw_expand", "arguments": raw}}


def test_an_offloaded_original_is_read_back_from_the_store_by_characters(
    store: MemoryResultStore,
) -> None:
    record = OffloadedResult("0123456789abcdef", "c", "read", "abcdefghij", "p")
    anyio.run(store.put, record)
    h = record.handle

    def ask(handle: Any, offset: Any = None, limit: Any = None, max_chars: int = 8000) -> str:
        args = {"handle": handle, "offset": offset, "limit": limit}
        args = {k: v for k, v in args.items() if v is not None}
        reply = anyio.run(lambda: answer(expand_call(args), [], max_chars=max_chars, store=store))
        return str(reply["content"])

    assert ask(h, 2, 3) == f"[{h}: characters 2-5 of 10; next offset 5]\ncde"
    assert ask(h, 8) == f"[{h}: characters 8-10 of 10; the end]\nij"
    assert ask(h, 0, 100, max_chars=4).endswith("\nabcd")
    assert ask("nope").startswith("Error: 'nope' is not a handle")
    assert "ffffffffffffffff: this result is no longer in the conversation" in ask("f" * 16)
    assert ask(h, 11).startswith("Error: offset=11 must be an integer from 0 to 10")
    assert ask(h, True).startswith("Error: offset=True")
    assert ask(h, 0, 0).startswith("Error: limit=0 must be an integer >= 1")


def test_the_store_beside_a_save_file_answers_when_the_history_lacks_the_original(
    tmp_path: Path,
) -> None:
    save_file = tmp_path / "agent.jsonl"
    prompt = anyio.run(
        lambda: ctxmw.prepare_prompt(
            history(BIG), "offload", save_file=save_file, settings=options()
        )
    )
    handle = prompt[2]["content"].split("[ctxmw offload ")[1][:16]
    store = FileResultStore(store_dir(save_file))
    reply = anyio.run(lambda: answer(expand_call({"handle": handle, "offset": 0}), [], store=store))
    assert reply["role"] == "tool"
    assert reply["tool_call_id"] == "x1"
    assert reply["content"].endswith(BIG[:8000])
    bad = anyio.run(lambda: answer(expand_call("[1]"), [], store=store))
    assert bad["content"].startswith("Error:")


def test_the_readback_schema_names_no_handle() -> None:
    assert set(READBACK_TOOL["function"]["parameters"]["properties"]) == {
        "handle",
        "start",
        "end",
        "pattern",
        "offset",
        "limit",
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=transcripts(), preview=st.sampled_from(["head", "tail"]))
def test_an_offloaded_results_sent_bytes_never_change(messages: Messages, preview: str) -> None:
    """Call after call (a session: one memo, one store), and again after a restart (a new memo,
    the same store, other settings), an offloaded result is sent with the same bytes."""
    store = MemoryResultStore()
    memo: dict[str, Any] = {}
    s = Settings(offload_threshold=50, offload_preview_chars=120, offload_preview=preview)
    first_sent: dict[str, str] = {}
    for point in call_points(messages):
        prompt = run(messages[:point], StrategyContext(settings=s, memo=memo), store)
        validate(prompt)
        _check_frozen(messages[:point], prompt, first_sent)
    restarted = Settings(offload_threshold=50, offload_preview_chars=7, offload_preview="head")
    prompt = run(messages, StrategyContext(settings=restarted, memo={}), store)
    _check_frozen(messages, prompt, first_sent)


def _check_frozen(sent: Messages, prompt: Messages, first_sent: dict[str, str]) -> None:
    assert len(prompt) == len(sent)
    for original, shown in zip(sent, prompt, strict=True):
        if shown is original:
            assert original.get("tool_call_id") not in first_sent  # once offloaded, always
            continue
        assert shown["role"] == "tool"
        assert shown["tool_call_id"] == original["tool_call_id"]
        key = shown["tool_call_id"]
        assert first_sent.setdefault(key, shown["content"]) == shown["content"]


def test_the_handle_survives_the_epoch_strategies_compacted_tier() -> None:
    msgs = history(*[BIG + str(i) for i in range(12)])
    s = Settings(
        offload_threshold=THRESHOLD,
        epoch_tool_call_threshold=4,
        epoch_size=2,
        epoch_full_tool_calls=1,
        epoch_compacted_tool_calls=20,
    )
    memo: dict[str, Any] = {}
    ctx = StrategyContext(settings=s, memo=memo, save_file=None)
    chain = ctxmw.strategies._chain.resolve_strategies("shorten_tools_epoch_increment", s)
    offloaded = run(msgs, ctx, MemoryResultStore())
    prompt = anyio.run(ctxmw.strategies._chain.apply_strategies, offloaded, chain, ctx)
    compacted = [m for m in prompt if m.get("role") == "tool" and "[compacted:" in m["content"]]
    assert compacted
    for m in compacted:
        assert handle_for(m["tool_call_id"], msgs_by_id(msgs)[m["tool_call_id"]]) in m["content"]


def msgs_by_id(msgs: Messages) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in msgs if m.get("role") == "tool"}
