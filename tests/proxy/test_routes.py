"""A real LiteLLM Proxy with ctxmw serving its three routes against every kind of deployment.

One replica, one loopback provider of all three APIs (as strict as the real ones: see
:mod:`tests.proxy._route_upstream`), three deployments on it: ``openai/`` (an OpenAI-compatible
server with the Responses API), ``anthropic/``, and ``llamafile/`` (a self-hosted chat-only
server: LiteLLM translates ``/v1/messages`` and ``/v1/responses`` to chat for it).

- The route matrix: every route x every deployment x streamed or not, an agent continuing its
  conversation from the answers it gets; what the provider received is valid by its API's
  rules and shortened, and the ledger line of each call carries the usage and cache reads the
  provider reported.
- Two long agent conversations on the native deployments (120 calls each, in Anthropic's and
  in the Responses format): valid, shortened, the prompts the in-process hook computes for the
  same conversation, every call in the ledger.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from tests._fleet_convo import FLEET_SETTINGS
from tests._long_run import SHORTENING_TIERS, assert_kept_promises, audit
from tests._proxy_routes import ANTHROPIC, RESPONSES, make_hook, send
from tests._route_formats import (
    anthropic_request,
    output_text,
    responses_output,
    responses_request,
)
from tests.proxy._route_clients import CLIENTS
from tests.proxy._served import Served, served_routes

pytestmark = pytest.mark.proxy

CALLS = 120
ROUNDS = 10
MATRIX = {
    "openai": "openai/gpt-4o",
    "anthropic": ANTHROPIC[1],
    "chat-only": "llamafile/local-model",
}
"""The matrix's deployments, each its own model group (named by its kind) on the upstream."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    pytest.importorskip("fastapi", reason="the fleet tier needs pip install -e '.[proxy]'")
    # The matrix's conversations are short: tiers that shorten within a few calls, whatever
    # the model's prices (the default strategy weighs them).
    section = {"settings": SHORTENING_TIERS, "models": dict.fromkeys(MATRIX, FLEET_SETTINGS)}
    with served_routes(tmp_path_factory.mktemp("routes"), MATRIX, section) as running:
        yield running


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("deployment", MATRIX)
@pytest.mark.parametrize("route", CLIENTS)
def test_a_route_in_front_of_a_deployment(
    served: Served, route: str, deployment: str, stream: bool
) -> None:
    client = CLIENTS[route]()
    session = f"{route}-{deployment}-{'streamed' if stream else 'whole'}"
    start = len(served.upstream.requests)
    for _ in range(ROUNDS):
        body = {"model": deployment, **client.body(), "stream": stream}
        response = served.post(client.path, body, session)
        assert response.status_code == 200, response.text
        client.continue_from(response, stream)
    assert served.upstream.problems[start:] == [[]] * ROUNDS  # one valid call per request
    _, last = served.upstream.requests[-1]
    assert _whole_outputs(last) < ROUNDS - 1  # the client sent ROUNDS - 1 of them whole
    records = served.ledger(session)
    assert [r["round"] for r in records] == list(range(ROUNDS))
    recorded = [
        (r["prompt_tokens"], r["cache_read_tokens"], r["completion_tokens"]) for r in records
    ]
    assert recorded == served.upstream.reported[start:]  # what the provider's answers said
    assert sum(r.cached for r in served.upstream.reported[start:] if r) > 0


def _whole_outputs(body: dict[str, Any]) -> int:
    """How many of the client's tool outputs ``body`` holds whole (in any API's format)."""
    sent = json.dumps(body)
    return sum(json.dumps(output_text(i))[1:-1] in sent for i in range(ROUNDS))


def test_a_long_claude_code_conversation_on_v1_messages(served: Served) -> None:
    start = len(served.upstream.requests)
    passed = []
    for n in range(CALLS):
        body = {"model": "claude", **anthropic_request(n), "stream": n == CALLS - 1}
        response = served.post("/v1/messages", body, "claude-run")
        assert response.status_code == 200, response.text
        passed.append(body)
    got = [body for _, body in served.upstream.requests[start:]]
    assert served.upstream.problems[start:] == [[]] * CALLS
    found = audit([b["messages"] for b in got], [b["messages"] for b in passed], lambda p: [])
    assert_kept_promises(found, "proxy /v1/messages")
    expected = anyio.run(_in_process, ANTHROPIC, passed)
    assert [(b["system"], b["messages"]) for b in got] == expected
    records = served.ledger("claude-run")
    assert [r["round"] for r in records] == list(range(CALLS))
    assert sum(r["cache_read_tokens"] or 0 for r in records) > 0


def test_a_long_codex_conversation_on_v1_responses_and_a_chained_turn(served: Served) -> None:
    start = len(served.upstream.requests)
    passed = []
    for n in range(CALLS):
        body = {"model": "gpt", **responses_request(n), "stream": n == CALLS - 1}
        response = served.post("/v1/responses", body, "codex-run")
        assert response.status_code == 200, response.text
        passed.append(body)
    got = [body for _, body in served.upstream.requests[start:]]
    assert served.upstream.problems[start:] == [[]] * CALLS
    found = audit([b["input"] for b in got], [b["input"] for b in passed], lambda p: [])
    assert_kept_promises(found, "proxy /v1/responses")
    expected = anyio.run(_in_process, RESPONSES, passed)
    assert [(b["instructions"], b["input"]) for b in got] == expected
    records = served.ledger("codex-run")
    assert [r["round"] for r in records] == list(range(CALLS))
    assert sum(r["cache_read_tokens"] or 0 for r in records) > 0
    # A turn that continues the provider's stored response sends only its new items.
    first = served.post("/v1/responses", {"model": "gpt", **responses_request(0)}, "chain")
    chained = {"model": "gpt", "previous_response_id": first.json()["id"]}
    call = next(item for item in first.json()["output"] if item["type"] == "function_call")
    chained["input"] = [{**responses_output(0), "call_id": call["call_id"]}]
    chained["metadata"] = {"ctxmw": {"epoch_size": 2}, "purpose": "a chained turn"}
    chained["extra_body"] = {"metadata": {"ctxmw": {"epoch_size": 2}}}
    assert served.post("/v1/responses", chained, "chain").status_code == 200
    assert served.upstream.problems[-1] == []  # metadata.ctxmw would be refused (not a string)
    assert served.upstream.requests[-1][1]["input"] == chained["input"]
    assert served.upstream.requests[-1][1]["metadata"] == {"purpose": "a chained turn"}


async def _in_process(route: tuple[str, str], bodies: list[dict[str, Any]]) -> list[Any]:
    """What the hook computes for the same conversation, without a proxy."""
    hook, out = make_hook(**SHORTENING_TIERS), []
    for body in bodies:
        request = {k: v for k, v in body.items() if k not in ("model", "stream")}
        sent = (await send(hook, route, request, {})).kwargs
        pair = ("system", "messages") if route is ANTHROPIC else ("instructions", "input")
        out.append((sent.get(pair[0]), sent[pair[1]]))
    return out
