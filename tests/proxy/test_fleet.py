"""Two real LiteLLM Proxy replicas with ctxmw, one Redis, one upstream that reports cache reads.

The promises of issue 13: a conversation alternating between replicas sends the prompts (and
writes the ledger) of one process; an inbox note posted once is delivered once; a replica killed
mid-request loses nothing that was acknowledged.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import anyio
import httpx
import pytest

from tests._fleet_convo import Oracle, comparable, history, on_the_wire
from tests.proxy.conftest import Fleet

pytestmark = pytest.mark.proxy

MODEL = "openai/fake-model"


def ledger(fleet: Fleet, session: str) -> list[dict[str, Any]]:
    """Every replica's ledger records of the client's ``session`` (kept under the key's scope,
    ``<scope>/<session>``), in round order."""
    records = []
    for replica in fleet.replicas:
        path = fleet.ledger(replica)
        if path.exists():
            lines = path.read_text(encoding="utf-8").splitlines()
            records += [r for r in map(json.loads, lines) if r["session"].endswith("/" + session)]
    return sorted(records, key=lambda r: r["round"])


def run(fleet: Fleet, session: str, rounds: range, pick: Any) -> list[list[dict[str, Any]]]:
    """Send rounds of the scripted conversation; the upstream's messages for each."""
    start = len(fleet.upstream.requests)
    for i in rounds:
        response = pick(i).chat(history(i), session)
        assert response.status_code == 200, response.text
    return [body["messages"] for body in fleet.upstream.requests[start:]]


def oracle_run(
    fleet: Fleet, session: str, rounds: range, notes: dict[int, str] | None = None
) -> Any:
    # The record's session is the conversation's scoped id: the client's id under its key's scope.
    oracle = Oracle(ledger(fleet, session)[0]["session"], MODEL, fleet.upstream.api_base)

    async def go() -> list[tuple[Any, dict[str, Any]]]:
        out = []
        for i in rounds:
            extra = (notes[i],) if notes and i in notes else ()
            out.append(await oracle.call(history(i), extra))
        return out

    return anyio.run(go)


def test_two_replicas_alternating_send_what_one_process_sends(fleet: Fleet) -> None:
    a, b = fleet.replicas
    rounds = range(14)
    single = run(fleet, "single", rounds, lambda i: a)
    alternating = run(fleet, "alternating", rounds, lambda i: (a, b)[i % 2])
    expected = oracle_run(fleet, "alternating", rounds)
    assert alternating == single
    assert alternating == on_the_wire([prompt for prompt, _ in expected])
    assert any(len(p) < len(history(i)) + 1 for i, p in enumerate(alternating))  # compacted
    records = ledger(fleet, "alternating")
    assert {r["replica"] for r in records} == {"replica-a", "replica-b"}
    assert [comparable(r) for r in records] == [comparable(rec) for _, rec in expected]
    # The upstream's own cache accounting agrees that the prefix carried over between replicas.
    assert sum(r["cache_read_tokens"] for r in records) > 0


def test_a_note_posted_once_is_delivered_once(fleet: Fleet) -> None:
    a, b = fleet.replicas
    run(fleet, "noted", range(2), lambda i: (a, b)[i % 2])
    posted = b.note("noted", "Focus on module 1 first.")
    assert posted.status_code == 200, posted.text
    prompts = run(fleet, "noted", range(2, 8), lambda i: (a, b)[i % 2])
    carrying = [p for p in prompts if {"role": "user", "content": "Focus on module 1 first."} in p]
    assert len(carrying) == 1
    assert prompts[0][-1]["content"] == "Focus on module 1 first."
    listed = httpx.get(f"{a.url}/ctxmw/inbox/noted", headers=_auth(), timeout=120).json()
    assert listed["pending"] == []


def test_the_inbox_route_needs_the_admin_key(fleet: Fleet) -> None:
    a = fleet.replicas[0]
    for bad in ({"Authorization": "Bearer sk-not-a-key-of-this-proxy"}, {}):
        refused = httpx.post(
            f"{a.url}/ctxmw/inbox/x", json={"text": "hi"}, headers=bad, timeout=120
        )
        assert refused.status_code in (400, 401, 403), refused.text
    listed = httpx.get(f"{a.url}/ctxmw/inbox/x", headers=_auth(), timeout=120).json()
    assert listed["pending"] == []
    empty = httpx.post(f"{a.url}/ctxmw/inbox/x", json={"text": "  "}, headers=_auth(), timeout=120)
    assert empty.status_code == 400
    assert "'text' must be a non-empty string" in empty.text


def test_abort_answers_the_next_request_with_400(fleet: Fleet) -> None:
    a, b = fleet.replicas
    run(fleet, "aborted", range(1), lambda i: a)
    stop = httpx.post(
        f"{b.url}/ctxmw/abort/aborted",
        json={"reason": "Budget reached."},
        headers=_auth(),
        timeout=120,
    )
    assert stop.status_code == 200
    answer = a.chat(history(1), "aborted")
    assert answer.status_code == 400
    assert "aborted through its inbox: Budget reached." in answer.text


def test_prometheus_counts_expected_beside_reported_cache_reads(fleet: Fleet) -> None:
    a, b = fleet.replicas
    run(fleet, "metered", range(4), lambda i: (a, b)[i % 2])
    scraped = httpx.get(
        f"{a.url}/metrics/", headers=_auth(), follow_redirects=True, timeout=120
    ).text
    lines = fleet.ledger(a).read_text(encoding="utf-8").splitlines()
    served = [json.loads(line) for line in lines]
    wanted = {
        "ctxmw_expected_cache_read_tokens_total": "expected_cached_tokens",
        "ctxmw_reported_cache_read_tokens_total": "cache_read_tokens",
        "ctxmw_requests_total": None,
    }
    for metric, field in wanted.items():
        lines = [ln for ln in scraped.splitlines() if ln.startswith(metric + "{")]
        assert lines, scraped[-3000:]
        assert all('model="openai/fake-model"' in ln and "strategies=" in ln for ln in lines)
        total = sum(float(ln.rsplit(" ", 1)[1]) for ln in lines)
        expected = len(served) if field is None else sum(r[field] for r in served)
        assert total == expected, metric
    assert sum(r["cache_read_tokens"] for r in served) > 0


def test_a_stream_delivers_its_note_once_and_is_recorded(fleet: Fleet) -> None:
    a, b = fleet.replicas
    assert b.note("streamed", "Streamed note.").status_code == 200
    start = len(fleet.upstream.requests)
    with httpx.stream(
        "POST",
        f"{a.url}/v1/chat/completions",
        json={
            "model": "agent",
            "messages": history(0),
            "litellm_session_id": "streamed",
            "stream": True,
        },
        headers=_auth(),
        timeout=120,
    ) as response:
        assert response.status_code == 200
        body = "".join(response.iter_text())
    assert "[DONE]" in body
    run(fleet, "streamed", range(1, 3), lambda i: (b, a)[i % 2])
    prompts = [r["messages"] for r in fleet.upstream.requests[start:]]
    note = {"role": "user", "content": "Streamed note."}
    assert [note in p for p in prompts] == [True, False, False]
    records = ledger(fleet, "streamed")
    expected = oracle_run(fleet, "streamed", range(3), {0: "Streamed note."})
    assert [comparable(r) for r in records] == [comparable(rec) for _, rec in expected]


def test_no_exception_in_the_replicas_logs(fleet: Fleet) -> None:
    # The proxy logs and swallows exceptions raised in success hooks: look for them.
    for replica in fleet.replicas:
        log = replica.log()
        assert "Traceback" not in log, log[-4000:]


def test_a_killed_replica_loses_nothing_acknowledged(fleet: Fleet) -> None:
    # Last in the module: replica a stays dead.
    a, b = fleet.replicas
    run(fleet, "killed", range(3), lambda i: (a, b)[i % 2])
    assert a.note("killed", "Note acknowledged before the crash.").status_code == 200
    fleet.upstream.hold()
    outcome: dict[str, Any] = {}

    def doomed() -> None:
        try:
            outcome["response"] = a.chat(history(3), "killed")
        except httpx.HTTPError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=doomed)
    thread.start()
    assert fleet.upstream.held.wait(timeout=120), "the request never reached the upstream"
    a.kill()  # mid-request: the note was claimed, the round never acknowledged
    thread.join(timeout=120)
    fleet.upstream.release()
    assert "error" in outcome, outcome
    note = {"role": "user", "content": "Note acknowledged before the crash."}
    assert note in fleet.upstream.requests[-1]["messages"]  # the doomed request carried it
    # The client retries on the surviving replica: the note comes again, then never.
    prompts = run(fleet, "killed", range(3, 6), lambda i: b)
    assert [note in p for p in prompts] == [True, False, False]
    expected = oracle_run(fleet, "killed", range(6), {3: note["content"]})
    assert prompts == on_the_wire([prompt for prompt, _ in expected[3:]])
    records = ledger(fleet, "killed")
    assert [comparable(r) for r in records] == [comparable(rec) for _, rec in expected]


def _auth() -> dict[str, str]:
    from tests.proxy._harness import MASTER_KEY

    return {"Authorization": f"Bearer {MASTER_KEY}"}
