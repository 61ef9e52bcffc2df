"""ctxmw inside code that calls litellm itself: patch_litellm, options in metadata, base_url.

A scripted OpenAI-compatible server on loopback plays the provider, so each request body that
litellm really sends can be checked.
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import litellm
import pytest

import ctxmw
from ctxmw.demo.scripted import ScriptedProvider
from ctxmw.runtime.identity import conversation_identity
from ctxmw.testing import FakeCompletion, text

pytestmark = pytest.mark.anyio

MODEL = "openai/scripted"
HISTORY = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


@pytest.fixture
async def provider() -> AsyncIterator[tuple[ScriptedProvider, str]]:
    server = ScriptedProvider()
    async with anyio.create_task_group() as tg:
        base = await server.serve(tg)
        yield server, base
        tg.cancel_scope.cancel()


def exists(path: Path) -> bool:
    return path.exists()


async def test_assigning_ctxmw_acompletion_to_litellm_does_not_recurse(
    provider: tuple[ScriptedProvider, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, base = provider
    monkeypatch.setattr(litellm, "acompletion", ctxmw.acompletion)
    reply = await litellm.acompletion(
        model=MODEL,
        messages=HISTORY,
        api_base=base,
        api_key="k",
        save_file=tmp_path / "agent.jsonl",
        prompt_strategies="none",
    )
    assert reply.choices[0].message.content == "ok"
    assert len(server.requests) == 1


async def test_ctxmw_options_in_metadata_or_kwargs_never_reach_the_provider(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    server, base = provider
    save_file = tmp_path / "agent.jsonl"
    with ctxmw.patch_litellm():
        await litellm.acompletion(
            model=MODEL,
            messages=HISTORY,
            api_base=base,
            api_key="k",
            metadata={"ctxmw": {"save_file": str(save_file), "prompt_strategies": "none"}},
        )
        await litellm.acompletion(
            model=MODEL,
            messages=HISTORY,
            api_base=base,
            api_key="k",
            save_file=str(save_file),
            prompt_strategies=["none"],
        )
    for body in server.requests:
        text = json.dumps(body)
        assert str(tmp_path) not in text
        assert "prompt_strategies" not in text
        assert "ctxmw" not in text
    assert exists(save_file)


async def test_patch_litellm_is_idempotent_and_undone(tmp_path: Path) -> None:
    original = litellm.acompletion
    first = ctxmw.patch_litellm(prompt_strategies="none")
    second = ctxmw.patch_litellm(prompt_strategies="none", save_file=str(tmp_path / "a.jsonl"))
    try:
        assert second is first
        assert first.active
        assert first.defaults["save_file"] == str(tmp_path / "a.jsonl")
    finally:
        first.undo()
    assert litellm.acompletion is original
    assert not first.active
    first.undo()  # a no-op the second time
    assert litellm.acompletion is original


async def test_the_patch_reaches_modules_that_copied_acompletion(
    provider: tuple[ScriptedProvider, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, base = provider
    framework = types.ModuleType("some_framework")
    framework.acompletion = litellm.acompletion  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "some_framework", framework)
    save_file = tmp_path / "agent.jsonl"
    with ctxmw.patch_litellm(prompt_strategies="none", save_file=str(save_file)):
        await framework.acompletion(model=MODEL, messages=HISTORY, api_base=base, api_key="k")
    assert framework.acompletion is litellm.acompletion
    assert exists(save_file)


async def test_a_patched_call_keeps_the_rest_of_the_metadata(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    async def provider_call(**kwargs: Any) -> Any:
        seen.append(kwargs)
        return text("ok")

    with ctxmw.patch_litellm(prompt_strategies="none"):
        await litellm.acompletion(
            model=MODEL,
            messages=HISTORY,
            completion=provider_call,
            metadata={"ctxmw": {"save_file": str(tmp_path / "a.jsonl")}, "trace": "t1"},
        )
    assert seen[0]["metadata"] == {"trace": "t1"}


async def test_unknown_options_in_metadata_are_a_clear_usage_error() -> None:
    with pytest.raises(ctxmw.UsageError, match=r"unknown option\(s\) \['save_fil'\]"):
        await ctxmw.acompletion(
            MODEL, HISTORY, metadata={"ctxmw": {"save_fil": "x"}}, completion=_never
        )


async def _never(**kwargs: Any) -> Any:
    raise AssertionError("the provider must not be called")


async def test_base_url_is_read_like_api_base_for_the_cache_rule(
    provider: tuple[ScriptedProvider, str], tmp_path: Path
) -> None:
    _, base = provider
    records: list[Any] = []
    await ctxmw.acompletion(
        MODEL,
        HISTORY,
        base_url=base,
        api_key="k",
        save_file=tmp_path / "agent.jsonl",
        prompt_strategies="none",
        on_call=[records.append],
    )
    assert records[0].cache_rule == "exact"


def conversation_id(kwargs: dict[str, Any]) -> str | None:
    identity = conversation_identity(kwargs, head=False)
    return identity.conversation if identity is not None else None


def test_conversation_id_prefers_the_save_file_then_session_then_litellms_ids() -> None:
    assert conversation_id({"save_file": "a.jsonl", "session": "s"}) == "a.jsonl"
    assert conversation_id({"metadata": {"ctxmw": {"save_file": "b.jsonl"}}}) == "b.jsonl"
    assert conversation_id({"session": "s", "litellm_session_id": "l"}) == "s"
    assert conversation_id({"litellm_session_id": "l", "metadata": {"session_id": "m"}}) == "l"
    assert conversation_id({"metadata": {"session_id": "m"}}) == "m"
    assert conversation_id({"model": "x"}) is None


async def test_undo_also_restores_a_module_that_copied_the_patched_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = litellm.acompletion
    framework = types.ModuleType("lazy_framework")
    monkeypatch.setitem(sys.modules, "lazy_framework", framework)
    patch = ctxmw.patch_litellm(prompt_strategies="none")
    try:
        framework.acompletion = litellm.acompletion  # type: ignore[attr-defined]  # a lazy import
    finally:
        patch.undo()
    assert framework.acompletion is original


async def test_a_fake_completion_given_to_the_patch_answers_both_functions_offline(
    tmp_path: Path,
) -> None:
    fake = FakeCompletion(text("async hi"), text("sync hi"))
    with ctxmw.patch_litellm(completion=fake, save_file=str(tmp_path / "agent.jsonl")):
        first = await litellm.acompletion(model="openai/gpt-4o", messages=HISTORY)
        more = [*HISTORY, {"role": "user", "content": "?"}]
        second = await anyio.to_thread.run_sync(lambda: litellm.completion("openai/gpt-4o", more))
    assert first.choices[0].message.content == "async hi"
    assert second.choices[0].message.content == "sync hi"
    assert len(fake.calls) == 2  # nothing reached litellm's own functions
    assert fake.remaining == 0


async def test_a_calls_own_completion_beats_the_patchs() -> None:
    patched, own = FakeCompletion(text("patched")), FakeCompletion(text("own"))
    with ctxmw.patch_litellm(completion=patched):
        reply = await litellm.acompletion(model="openai/gpt-4o", messages=HISTORY, completion=own)
    assert reply.choices[0].message.content == "own"
    assert patched.calls == []
