"""The proxy callback driven hook by hook, as the proxy calls it (no proxy process).

Two ``CtxmwProxyHook`` objects sharing one state stand for two replicas; the real proxy and
Redis are exercised in ``tests/proxy``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest

from ctxmw.proxy import CtxmwProxyHook, ProxyConfig, config_from_mapping
from ctxmw.proxy.tenancy import scope_of
from ctxmw.state import MemoryState, Note, State
from ctxmw.testing import text, usage
from ctxmw.types import Messages
from tests._fleet_convo import FLEET_SETTINGS, Oracle, comparable, history

pytestmark = pytest.mark.anyio

MODEL, API_BASE = "openai/fake-model", "http://127.0.0.1:9/v1"
_ids = itertools.count()


class Key:
    """The bits of the proxy's ``UserAPIKeyAuth`` the hook reads."""

    def __init__(
        self,
        alias: str | None = None,
        metadata: dict[str, Any] | None = None,
        *,
        team: str | None = None,
        user: str | None = None,
        token: str = "hashed-token-value",
    ) -> None:
        self.key_alias, self.metadata, self.token = alias, metadata or {}, token
        self.team_id, self.user_id = team, user


def scoped(name: str = "conv", key: Key | None = None) -> str:
    """The id a conversation's state is kept under: the key's scope, then the client's id."""
    return f"{scope_of(key or Key())}/{name}"


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
    reply: str = "ok",
) -> tuple[Messages, dict[str, Any]]:
    """One request through the hooks: the prompt sent upstream and the request's data.

    As the proxy does: every hook of the request gets its one logging object, except the
    failure hook, whose data (the pre-call hook's dict) the proxy strips of it first.
    """
    call_id, request = f"call-{next(_ids)}", object()
    data: dict[str, Any] = {
        "model": "agent",
        "messages": messages,
        "litellm_call_id": call_id,
        "litellm_logging_obj": request,
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
        "litellm_logging_obj": request,
    }
    sent = await hook.async_pre_call_deployment_hook(kwargs, "acompletion") or kwargs
    if fail:
        del data["litellm_logging_obj"]
        await hook.async_post_call_failure_hook(data, RuntimeError("upstream down"), key or Key())
    else:
        response = text(reply, usage=usage(10, 1))
        await hook.async_post_call_success_hook(data, key or Key(), response)
    return sent["messages"], data


def ledger_of(data: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = data["metadata"]["spend_logs_metadata"]["ctxmw"]
    return entry


async def test_two_replicas_alternating_send_and_record_what_one_process_would() -> None:
    state = MemoryState()
    replicas = [make_hook(state), make_hook(state)]
    oracle = Oracle(scoped("conv"), MODEL, API_BASE)
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
    await state.push_note(scoped(), "note", "Focus on module 3.")
    first, _ = await send(b, history(1))
    assert first[-1] == {"role": "user", "content": "Focus on module 3."}
    second, _ = await send(a, history(2))
    third, _ = await send(b, history(3))
    assert all(m.get("content") != "Focus on module 3." for m in second + third)


async def test_a_failed_request_gives_its_notes_back() -> None:
    state = MemoryState()
    a, b = make_hook(state), make_hook(state)
    await state.push_note(scoped(), "note", "retry me")
    failed, _ = await send(a, history(1), fail=True)
    assert failed[-1]["content"] == "retry me"
    retried, _ = await send(b, history(1))
    assert retried[-1]["content"] == "retry me"
    later, _ = await send(a, history(2))
    assert later[-1]["role"] == "tool"


class Requeues(MemoryState):
    """A state that remembers what each settle gave back."""

    def __init__(self) -> None:
        super().__init__()
        self.given_back: list[list[str]] = []

    async def settle(self, conversation: str, claim: str, requeue: Sequence[Note] = ()) -> None:
        self.given_back.append([note.text for note in requeue])
        await super().settle(conversation, claim, requeue)


@pytest.mark.parametrize("handed", ["its data", "a copy"])
async def test_a_failed_request_gives_its_notes_back_at_once(handed: str) -> None:
    """The proxy hands the failure hook the request's data without its logging object: the
    pre-call hook's dict, or on /v1/responses a shallow copy of it. Either way the notes go back
    at once, not only when the conversation's next request takes them over."""
    state = Requeues()
    hook = make_hook(state)
    await state.push_note(scoped(), "note", "retry me")
    request, server_request = object(), {"url": "http://proxy/v1/responses"}
    data: dict[str, Any] = {"model": "agent", "messages": history(1), "litellm_session_id": "conv"}
    data |= {"litellm_logging_obj": request, "proxy_server_request": server_request}
    await hook.async_pre_call_hook(Key(), None, data, "acompletion")
    kwargs = {"model": MODEL, "messages": history(1), "litellm_logging_obj": request}
    await hook.async_pre_call_deployment_hook(kwargs, "acompletion")
    del data["litellm_logging_obj"]
    failed = dict(data) if handed == "a copy" else data
    await hook.async_post_call_failure_hook(failed, RuntimeError("upstream down"), Key())
    assert state.given_back == [["retry me"]]


async def test_a_request_whose_replica_died_is_redelivered_by_the_next() -> None:
    state = MemoryState()
    a, b = make_hook(state), make_hook(state)
    await state.push_note(scoped(), "note", "owed")
    data: dict[str, Any] = {
        "model": "agent",
        "messages": history(1),
        "litellm_call_id": "dies",
        "litellm_logging_obj": object(),
        "litellm_session_id": "conv",
    }
    await a.async_pre_call_hook(Key(), None, data, "acompletion")  # ... and no end hook: killed
    retried, _ = await send(b, history(1))
    assert retried[-1]["content"] == "owed"
    assert await state.pending_notes(scoped()) == []


async def test_abort_answers_the_request_with_its_reason_and_keeps_the_notes() -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException

    state = MemoryState()
    hook = make_hook(state)
    await state.push_note(scoped(), "note", "before")
    await state.push_note(scoped(), "abort", "Budget reached.")
    await state.push_note(scoped(), "note", "after")
    with pytest.raises(HTTPException) as raised:
        await send(hook, history(1))
    assert raised.value.status_code == 400
    assert f"{scoped()!r} was aborted through its inbox: Budget reached." in str(
        raised.value.detail
    )
    prompt, _ = await send(hook, history(1))
    assert [m["content"] for m in prompt[-2:]] == ["before", "after"]


async def test_without_inbox_in_the_list_notes_wait() -> None:
    state = MemoryState()
    hook = make_hook(state, settings={**FLEET_SETTINGS, "prompt_strategies": "none"})
    await state.push_note(scoped(), "note", "later")
    prompt, _ = await send(hook, history(1))
    assert prompt == history(1)
    assert [n.text for n in await state.pending_notes(scoped())] == ["later"]


async def test_options_layer_model_group_then_key_alias() -> None:
    hook = make_hook(
        MemoryState(),
        models={"agent": {"prompt_strategies": "shorten_tools_epoch"}},
        keys={"ci-bot": {"prompt_strategies": "none"}},
    )
    assert (await send(hook, history(12)))[0] != history(12)  # the model group's list
    prompt, _ = await send(hook, history(12), key=Key("ci-bot"))
    assert prompt == history(12)  # the key alias's "none" beat the model group's list


async def test_request_options_are_refused_by_default_naming_them() -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException

    hook = make_hook(MemoryState())
    for ctxmw in ({"prompt_strategies": "none"}, {"epoch_size": 3}):
        with pytest.raises(HTTPException) as raised:
            await send(hook, history(12), metadata={"ctxmw": ctxmw})
        assert raised.value.status_code == 400
        assert f"sets {next(iter(ctxmw))!r}" in str(raised.value.detail)
        assert "it allows none" in str(raised.value.detail)


async def test_a_keys_own_metadata_is_a_tenants_and_follows_the_same_rule() -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException

    hook = make_hook(MemoryState())
    key = Key(metadata={"ctxmw": {"prompt_strategies": "none"}})
    with pytest.raises(HTTPException, match=r"the key's metadata\.ctxmw sets 'prompt_strategies'"):
        await send(hook, history(12), key=key)
    allowing = make_hook(MemoryState(), request_options=["short_output_length"])
    key = Key(metadata={"ctxmw": {"short_output_length": 50}})
    shorter, _ = await send(allowing, history(12), key=key, session="a")
    default, _ = await send(allowing, history(12), session="b")
    assert len(str(shorter)) < len(str(default))


async def test_allowed_request_options_may_narrow_the_strategies_but_keep_inbox() -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException

    hook = make_hook(MemoryState(), request_options=["prompt_strategies", "epoch_size"])
    for refused, reason in (
        ("none", "drops 'inbox'"),
        ("shorten_tools_epoch_increment", "drops 'inbox'"),
        ("summarize,inbox", "'summarize'] is not among them"),
    ):
        with pytest.raises(HTTPException) as raised:
            await send(hook, history(12), metadata={"ctxmw": {"prompt_strategies": refused}})
        assert reason in str(raised.value.detail), refused
    narrowed, _ = await send(hook, history(12), metadata={"ctxmw": {"prompt_strategies": "inbox"}})
    assert narrowed == history(12)  # inbox alone: nothing shortened, the abort switch kept


async def test_a_bad_allowed_option_is_a_400_naming_it() -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException

    hook = make_hook(MemoryState(), request_options=["epoch_size"])
    with pytest.raises(HTTPException) as raised:
        await send(hook, history(1), metadata={"ctxmw": {"epoch_size": "many"}})
    assert raised.value.status_code == 400
    assert "epoch_size" in str(raised.value.detail)


async def test_options_are_taken_out_of_the_request_wherever_they_came() -> None:
    hook = make_hook(MemoryState(), request_options=["epoch_size"])
    call_id = f"call-{next(_ids)}"
    data: dict[str, Any] = {
        "model": "agent",
        "messages": history(3),
        "litellm_call_id": call_id,
        "metadata": {"ctxmw": {"epoch_size": 2}, "user_api_key_hash": "h"},
        "extra_body": {"metadata": {"ctxmw": {"epoch_size": 3}}},
    }
    await hook.async_pre_call_hook(Key(), None, data, "acompletion")
    assert "ctxmw" not in repr(data)
    assert data["metadata"] == {"user_api_key_hash": "h"}


async def test_the_head_digest_keys_a_conversation_without_a_session_id() -> None:
    state = MemoryState()
    a, b = make_hook(state), make_hook(state)
    await send(a, history(1), session=None)
    _, data = await send(b, history(2), session=None)
    entry = ledger_of(data)
    assert entry["identity"] == "head"
    assert entry["session"].startswith(scoped("head-"))
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
    request = object()  # the proxy's logging object for this request
    data: dict[str, Any] = {"model": "agent", "messages": messages, "litellm_logging_obj": request}
    await hook.async_pre_call_hook(Key(), None, data, "acompletion")
    kwargs = {
        "model": "anthropic/claude-sonnet-4-5",
        "messages": messages,
        "litellm_logging_obj": request,
        "cache_control_injection_points": points,
    }
    sent = await hook.async_pre_call_deployment_hook(kwargs, "acompletion")
    assert sent is not None
    own = sum(map(count_marks, sent["messages"]))
    assert own == MAX_BREAKPOINTS - len(injected_indices(sent["messages"], points))


async def test_two_requests_sharing_a_call_id_each_send_their_own_conversation() -> None:
    """A client may set ``x-litellm-call-id``: two tenants' requests in flight at once with
    one id, both past the pre-call hook before either reaches the deployment, stay apart."""
    hook = make_hook(MemoryState(), ledger="none")
    keys = [Key(team="team-a"), Key(team="team-b")]
    requests = [object(), object()]  # the proxy's logging object of each request
    datas: list[dict[str, Any]] = []
    for key, request, tag in zip(keys, requests, ("A", "B"), strict=True):
        data = {"model": "agent", "messages": history(8, tag=tag), "litellm_call_id": "same"}
        datas.append({**data, "litellm_session_id": "run", "litellm_logging_obj": request})
        await hook.async_pre_call_hook(key, None, datas[-1], "acompletion")
    sent = []
    for request, tag in zip(requests, ("A", "B"), strict=True):
        kwargs = {"model": MODEL, "messages": history(8, tag=tag), "litellm_call_id": "same"}
        kwargs["litellm_logging_obj"] = request
        sent.append(await hook.async_pre_call_deployment_hook(kwargs, "acompletion"))
    assert [s["messages"][0]["content"] for s in sent] == [
        history(1, tag="A")[0]["content"],
        history(1, tag="B")[0]["content"],
    ]
    for key, data in zip(keys, datas, strict=True):
        await hook.async_post_call_success_hook(data, key, text("ok", usage=usage(10, 1)))
        assert ledger_of(data)["session"] == scoped("run", key)
