"""The proxy callback driven hook by hook, as the proxy calls it (no proxy process).

Two ``CtxmwProxyHook`` objects sharing one state stand for two replicas; the real proxy and
Redis are exercised in ``tests/proxy``.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ctxmw.proxy import CtxmwProxyHook, ProxyConfig, config_from_mapping
from ctxmw.state import MemoryState, State
from ctxmw.testing import text, usage
from ctxmw.types import Messages
from tests._fleet_convo import FLEET_SETTINGS, Oracle, comparable, history

pytestmark = pytest.mark.anyio

MODEL, API_BASE = "openai/fake-model", "http://127.0.0.1:9/v1"
_ids = itertools.count()


class Key:
    """The bits of the proxy's ``UserAPIKeyAuth`` the hook reads."""

    def __init__(self, alias: str | None = None, metadata: dict[str, Any] | None = None) -> None:
        self.key_alias, self.metadata, self.token = alias, metadata or {}, "hashed-token-value"


def make_hook(state: State, **section: Any) -> CtxmwProxyHook:
    config = config_from_mapping({"ctxmw": {"settings": FLEET_SETTINGS, **section}})
    return CtxmwProxyHook(config, state=state)


async def send(
    hook: CtxmwProxyHook,
    messages: Messages,
    *,
    session: str | None = "conv",
    metadata: dict[str, Any] | None = None,
    key: Key | None = None,
    fail: bool = False,
) -> tuple[Messages, dict[str, Any]]:
    """One request through the hooks: the prompt sent upstream and the request's data."""
    call_id = f"call-{next(_ids)}"
    data: dict[str, Any] = {
        "model": "agent",
        "messages": messages,
        "litellm_call_id": call_id,
        "metadata": dict(metadata or {}),
    }
    if session is not None:
        data["litellm_session_id"] = session
    await hook.async_pre_call_hook(key or Key(), None, data, "acompletion")
    kwargs = {
        "model": MODEL,
        "api_base": API_BASE,
        "messages": messages,
        "litellm_call_id": call_id,
    }
    sent = await hook.async_pre_call_deployment_hook(kwargs, None)
    assert sent is not None
    if fail:
        await hook.async_post_call_failure_hook(data, RuntimeError("upstream down"), key or Key())
    else:
        response = text("ok", usage=usage(10, 1))
        await hook.async_post_call_success_hook(data, key or Key(), response)
    return sent["messages"], data


def ledger_of(data: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = data["metadata"]["spend_logs_metadata"]["ctxmw"]
    return entry


async def test_two_replicas_alternating_send_and_record_what_one_process_would() -> None:
    state = MemoryState()
    replicas = [make_hook(state), make_hook(state)]
    oracle = Oracle("conv", MODEL, API_BASE)
    for i in range(20):
        prompt, data = await send(replicas[i % 2], history(i))
        expected_prompt, expected_record = await oracle.call(history(i))
        assert prompt == expected_prompt, f"round {i}"
        assert comparable(ledger_of(data)) == comparable(expected_record), f"round {i}"


async def test_without_a_shared_state_the_second_replica_starts_over() -> None:
    # The property above is the state's doing: two replicas that share nothing disagree.
    a, b = make_hook(MemoryState()), make_hook(MemoryState())
    await send(a, history(1))
    _, data = await send(b, history(2))
    assert ledger_of(data)["round"] == 0
    assert ledger_of(data)["prefix_tokens_local"] == 0


async def test_a_note_is_delivered_once_by_whichever_replica_serves_next() -> None:
    state = MemoryState()
    a, b = make_hook(state), make_hook(state)
    await state.push_note("conv", "note", "Focus on module 3.")
    first, _ = await send(b, history(1))
    assert first[-1] == {"role": "user", "content": "Focus on module 3."}
    second, _ = await send(a, history(2))
    third, _ = await send(b, history(3))
    assert all(m.get("content") != "Focus on module 3." for m in second + third)


async def test_a_failed_request_gives_its_notes_back() -> None:
    state = MemoryState()
    a, b = make_hook(state), make_hook(state)
    await state.push_note("conv", "note", "retry me")
    failed, _ = await send(a, history(1), fail=True)
    assert failed[-1]["content"] == "retry me"
    retried, _ = await send(b, history(1))
    assert retried[-1]["content"] == "retry me"
    later, _ = await send(a, history(2))
    assert later[-1]["role"] == "tool"


async def test_a_request_whose_replica_died_is_redelivered_by_the_next() -> None:
    state = MemoryState()
    a, b = make_hook(state), make_hook(state)
    await state.push_note("conv", "note", "owed")
    data: dict[str, Any] = {
        "model": "agent",
        "messages": history(1),
        "litellm_call_id": "dies",
        "litellm_session_id": "conv",
    }
    await a.async_pre_call_hook(Key(), None, data, "acompletion")  # ... and no end hook: killed
    retried, _ = await send(b, history(1))
    assert retried[-1]["content"] == "owed"
    assert await state.pending_notes("conv") == []


async def test_abort_answers_the_request_with_its_reason_and_keeps_the_notes() -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException

    state = MemoryState()
    hook = make_hook(state)
    await state.push_note("conv", "note", "before")
    await state.push_note("conv", "abort", "Budget reached.")
    await state.push_note("conv", "note", "after")
    with pytest.raises(HTTPException) as raised:
        await send(hook, history(1))
    assert raised.value.status_code == 400
    assert "'conv' was aborted through its inbox: Budget reached." in str(raised.value.detail)
    prompt, _ = await send(hook, history(1))
    assert [m["content"] for m in prompt[-2:]] == ["before", "after"]


async def test_without_inbox_in_the_list_notes_wait() -> None:
    state = MemoryState()
    hook = make_hook(state, settings={**FLEET_SETTINGS, "prompt_strategies": "none"})
    await state.push_note("conv", "note", "later")
    prompt, _ = await send(hook, history(1))
    assert prompt == history(1)
    assert [n.text for n in await state.pending_notes("conv")] == ["later"]


async def test_options_layer_model_key_and_request() -> None:
    hook = make_hook(
        MemoryState(),
        models={"agent": {"epoch_size": 7}},
        keys={"ci-bot": {"prompt_strategies": "none"}},
    )
    prompt, _ = await send(hook, history(12), key=Key("ci-bot"))
    assert prompt == history(12)  # the key's "none" beat the config's list
    prompt, _ = await send(
        hook,
        history(12),
        key=Key("ci-bot"),
        metadata={"ctxmw": {"prompt_strategies": "shorten_tools_epoch"}},
    )
    assert prompt != history(12)  # the request's list beat the key's


async def test_a_key_metadata_section_counts_like_a_keys_entry() -> None:
    hook = make_hook(MemoryState())
    key = Key(metadata={"ctxmw": {"prompt_strategies": "none"}})
    prompt, _ = await send(hook, history(12), key=key)
    assert prompt == history(12)


async def test_a_bad_request_option_is_a_400_naming_it() -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException

    hook = make_hook(MemoryState())
    with pytest.raises(HTTPException) as raised:
        await send(hook, history(1), metadata={"ctxmw": {"epoch_size": "many"}})
    assert raised.value.status_code == 400
    assert "epoch_size" in str(raised.value.detail)
    with pytest.raises(HTTPException, match=r"no_such_strategy"):
        await send(hook, history(1), metadata={"ctxmw": {"prompt_strategies": "no_such_strategy"}})


async def test_request_options_can_be_turned_off() -> None:
    hook = make_hook(MemoryState(), request_options=False)
    prompt, _ = await send(hook, history(12), metadata={"ctxmw": {"prompt_strategies": "none"}})
    assert prompt != history(12)


async def test_the_head_digest_keys_a_conversation_without_a_session_id() -> None:
    state = MemoryState()
    a, b = make_hook(state), make_hook(state)
    await send(a, history(1), session=None)
    _, data = await send(b, history(2), session=None)
    entry = ledger_of(data)
    assert entry["identity"] == "head"
    assert entry["session"].startswith("head-")
    assert entry["round"] == 1


async def test_other_call_types_pass_through() -> None:
    hook = make_hook(MemoryState())
    data = {"model": "agent", "input": "embed me", "litellm_call_id": "e"}
    assert await hook.async_pre_call_hook(Key(), None, data, "aembedding") is None
    assert await hook.async_pre_call_deployment_hook({"litellm_call_id": "e"}, None) is None


def test_the_default_config_is_memory_without_a_ledger() -> None:
    config = ProxyConfig()
    assert config.state == "memory"
    assert config.ledger_path() is None


async def test_a_replica_keeps_each_conversations_memo_between_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ctxmw.proxy import callback

    memos: list[Any] = []
    original = callback.apply_strategies

    async def spy(messages: Messages, chain: Any, ctx: Any, **kw: Any) -> Messages:
        memos.append(ctx.memo)
        return await original(messages, chain, ctx, **kw)

    monkeypatch.setattr(callback, "apply_strategies", spy)
    hook = make_hook(MemoryState())
    await send(hook, history(3), session="a")
    await send(hook, history(4), session="b")
    await send(hook, history(5), session="a")
    assert memos[0] is not None
    assert memos[0] is memos[2]
    assert memos[1] is not memos[0]
    assert memos[2]  # the strategies cached what they derived from the history


async def test_the_deployments_injection_points_count_against_the_mark_limit() -> None:
    """litellm marks ``cache_control_injection_points`` after the hook: cache_breakpoints
    leaves room for them (a Claude deployment, the default chain's closing step)."""
    from ctxmw.telemetry.marks import MAX_BREAKPOINTS, count_marks, injected_indices
    from tests._synthetic import session as synthetic

    points = [{"location": "message", "role": "system"}]
    hook = make_hook(MemoryState(), settings={"prompt_strategies": "cache_breakpoints"})
    messages, _ = synthetic(120)
    data: dict[str, Any] = {"model": "agent", "messages": messages, "litellm_call_id": "c1"}
    await hook.async_pre_call_hook(Key(), None, data, "acompletion")
    kwargs = {
        "model": "anthropic/claude-sonnet-4-5",
        "messages": messages,
        "litellm_call_id": "c1",
        "cache_control_injection_points": points,
    }
    sent = await hook.async_pre_call_deployment_hook(kwargs, None)
    assert sent is not None
    own = sum(map(count_marks, sent["messages"]))
    assert own == MAX_BREAKPOINTS - len(injected_indices(sent["messages"], points))
