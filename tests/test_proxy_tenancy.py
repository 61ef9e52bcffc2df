"""Tenants of one proxy never share a conversation: every identity is scoped by the key's owner.

Two hooks sharing one state stand for two replicas; the keys are the parts of litellm's
``UserAPIKeyAuth`` the hook reads. The same checks on real replicas: tests/proxy/test_tenants.py.
"""

from __future__ import annotations

import logging

import pytest

from ctxmw.errors import UsageError
from ctxmw.proxy.tenancy import inbox_target, scope_of, scoped_identity
from ctxmw.runtime.identity import MAX_ID
from ctxmw.state import MemoryState
from tests._fleet_convo import history
from tests.test_proxy_callback import Key, ledger_of, make_hook, send

pytestmark = pytest.mark.anyio

ALICE = Key("alice-key", team="team-a", token="hash-of-alice-key")
BOB = Key("bob-key", team="team-b", token="hash-of-bob-key")


class Admin(Key):
    user_role = "proxy_admin"


def test_the_scope_is_the_team_else_the_user_else_a_digest_of_the_key() -> None:
    assert scope_of(Key(team="t1", user="u1")) == "team:t1"
    assert scope_of(Key(user="u/1")) == "user:u%2F1"  # no "/" inside a scope
    digest = scope_of(Key(token="sk-secret-hash"))
    assert digest.startswith("key:")
    assert "secret" not in digest
    assert scope_of(Key(token="another-hash")) != digest
    assert scope_of(object()) == "open:"


async def test_same_head_and_session_id_are_two_conversations_for_two_teams() -> None:
    state = MemoryState()
    replicas = [make_hook(state), make_hook(state)]
    await state.push_note("team:team-a/run-1", "note", "Admin note for team A only.")
    bob_prompt, bob_data = await send(replicas[0], history(2), session="run-1", key=BOB)
    alice_prompt, alice_data = await send(replicas[1], history(2), session="run-1", key=ALICE)
    note = {"role": "user", "content": "Admin note for team A only."}
    assert note not in bob_prompt
    assert alice_prompt[-1] == note
    assert ledger_of(bob_data)["session"] == "team:team-b/run-1"
    assert ledger_of(alice_data)["session"] == "team:team-a/run-1"
    assert ledger_of(alice_data)["round"] == 0  # not bob's conversation continued


async def test_one_tenants_abort_is_never_consumed_by_another() -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException

    state = MemoryState()
    hook = make_hook(state)
    await state.push_note("team:team-a/run-1", "abort", "Stop now.")
    for _ in range(2):  # bob, same session id and head, goes on: nothing of A's is his
        await send(hook, history(1), session="run-1", key=BOB)
    for session in (None, "run-1"):  # nor does a head-digest conversation of bob's see it
        await send(hook, history(1), session=session, key=BOB)
    with pytest.raises(HTTPException, match="Stop now"):
        await send(hook, history(1), session="run-1", key=ALICE)


async def test_head_digest_conversations_are_scoped_too() -> None:
    state = MemoryState()
    hook = make_hook(state)
    _, a = await send(hook, history(1), session=None, key=ALICE)
    _, b = await send(hook, history(2), session=None, key=BOB)
    assert ledger_of(a)["session"].startswith("team:team-a/head-")
    assert ledger_of(b)["session"].startswith("team:team-b/head-")
    assert ledger_of(b)["round"] == 0


async def test_a_ctxmw_session_option_does_not_name_a_conversation_in_the_proxy() -> None:
    # metadata.ctxmw is the operator's to allow (and refused here); it never picks an identity.
    HTTPException = pytest.importorskip("fastapi").HTTPException

    with pytest.raises(HTTPException, match="'session'"):
        await send(make_hook(MemoryState()), history(1), metadata={"ctxmw": {"session": "x"}})


def test_the_admin_names_any_conversation_by_its_scoped_id() -> None:
    admin = Admin(user="admin", token="hash-of-master-key")
    assert inbox_target("team:team-a/run-1", admin) == "team:team-a/run-1"
    assert inbox_target("team:team-a/dir/run 1 ", admin) == "team:team-a/dir/run 1"
    assert inbox_target("run-1", admin) == "user:admin/run-1"  # bare: the admin's own


def test_a_tenant_names_only_conversations_of_its_own_scope() -> None:
    assert inbox_target("run-1", ALICE) == "team:team-a/run-1"
    assert inbox_target("team:team-b/run-1", ALICE) == "team:team-a/team:team-b/run-1"


def test_inbox_ids_are_normalised_like_the_conversations_own() -> None:
    long_id = "r" * 300
    target = inbox_target(f"  {long_id}  ", ALICE)
    assert target.startswith("team:team-a/" + "r" * 150)
    assert len(target.split("/", 1)[1]) <= MAX_ID
    with pytest.raises(UsageError, match="is blank"):
        inbox_target("   ", ALICE)


async def test_a_note_to_a_long_or_padded_id_is_delivered() -> None:
    state = MemoryState()
    hook = make_hook(state)
    long_id = "session-" + "x" * 250
    for path, session in ((f"  {long_id}", long_id), (" run/42 ", "run/42")):
        await state.push_note(inbox_target(path, ALICE), "note", f"to {session[:12]}")
        prompt, _ = await send(hook, history(1), session=session, key=ALICE)
        assert prompt[-1] == {"role": "user", "content": f"to {session[:12]}"}


async def test_two_long_ids_that_share_200_characters_stay_two_conversations() -> None:
    state = MemoryState()
    hook = make_hook(state)
    first, second = "s" * 250 + "1", "s" * 250 + "2"
    await state.push_note(inbox_target(first, ALICE), "note", "only for the first")
    second_prompt, _ = await send(hook, history(1), session=second, key=ALICE)
    first_prompt, _ = await send(hook, history(1), session=first, key=ALICE)
    assert second_prompt[-1]["role"] == "tool"
    assert first_prompt[-1]["content"] == "only for the first"


def test_a_save_file_or_session_in_the_body_names_no_conversation() -> None:
    junk = "s\x00\n" * 100_000  # 300 kB of id, with a NUL and a line break
    data = {"messages": history(1), "save_file": "/tmp/agent.jsonl", "session": junk}
    assert scoped_identity(data, ALICE).source == "head"
    named = scoped_identity({**data, "litellm_session_id": "run-7"}, ALICE)
    assert (named.conversation, named.source) == ("team:team-a/run-7", "session_id")


async def test_a_lone_surrogate_in_a_session_id_is_a_400_naming_it() -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException

    with pytest.raises(HTTPException) as raised:
        await send(make_hook(MemoryState()), history(1), session="run-\ud800")
    assert raised.value.status_code == 400
    assert "'run-\\ud800' is not valid Unicode text" in raised.value.detail["error"]
    with pytest.raises(UsageError, match="not valid Unicode"):
        inbox_target("run-\udc80", ALICE)


@pytest.mark.parametrize(
    ("chain", "refusal"),
    [
        ("inbox,inbox", "lists ['inbox'] more than once"),
        (["inbox"] * 201, "lists 201 strategies; it may list at most 2"),
    ],
)
async def test_a_tenant_chain_repeats_no_strategy_and_is_no_longer_than_the_operators(
    chain: object, refusal: str
) -> None:
    HTTPException = pytest.importorskip("fastapi").HTTPException

    hook = make_hook(MemoryState(), request_options=["prompt_strategies"])
    with pytest.raises(HTTPException) as raised:
        await send(hook, history(1), metadata={"ctxmw": {"prompt_strategies": chain}})
    assert raised.value.status_code == 400
    assert refusal in raised.value.detail["error"]


async def test_a_session_id_reaches_the_proxy_log_line_escaped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="ctxmw"):
        await send(make_hook(MemoryState()), history(1), session="run\x1b[31m\nforged line")
    lines = [r.getMessage() for r in caplog.records]
    line = next(text for text in lines if "ctxmw proxy conversation=" in text)
    assert "run\\x1b[31m\\nforged line" in line
    assert "\x1b" not in line
    assert "\n" not in line
