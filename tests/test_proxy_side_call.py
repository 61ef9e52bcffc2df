"""A strategy's own call in the proxy (a summary) goes to the deployment of the call it serves.

The same endpoint, the same credentials, and the request's metadata (so the proxy's spend logs
bill it to the caller's key); never the provider's default endpoint, a key from the proxy's
environment, or a model the strategy names.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from ctxmw.proxy import _side_call
from ctxmw.proxy._side_call import DeploymentCall
from ctxmw.state import MemoryState
from ctxmw.strategies.summarize import clear_cache
from tests._fleet_convo import history
from tests.test_proxy_callback import Key, make_hook

pytestmark = pytest.mark.anyio

DEPLOYMENT = "http://127.0.0.1:9/v1"
SUMMARY = {
    "id": "chatcmpl-s",
    "object": "chat.completion",
    "created": 1,
    "model": "fake-model",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "A summary."}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
}


async def test_a_summary_goes_to_the_deployment_with_its_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-proxy-process-own-key")
    clear_cache()
    settings = {"prompt_strategies": "summarize,inbox", "context_window": 6000}
    hook = make_hook(MemoryState(), settings=settings)
    messages = history(40)
    request = object()  # the proxy's logging object for this request
    data: dict[str, Any] = {"model": "agent", "messages": messages, "litellm_logging_obj": request}
    await hook.async_pre_call_hook(Key(), None, data, "acompletion")
    kwargs = {
        "model": "openai/fake-model",
        "messages": messages,
        "litellm_logging_obj": request,
        "api_base": DEPLOYMENT,
        "api_key": "sk-deployment-key",
    }
    with respx.mock(using="httpx") as router:  # any other host is refused
        route = router.post(f"{DEPLOYMENT}/chat/completions").mock(
            return_value=httpx.Response(200, json=SUMMARY)
        )
        await hook.async_pre_call_deployment_hook(kwargs, "acompletion")
    assert route.called
    request = route.calls.last.request
    assert request.headers["authorization"] == "Bearer sk-deployment-key"
    assert json.loads(request.content)["model"] == "fake-model"
    clear_cache()


async def test_the_side_call_keeps_the_requests_metadata_and_never_another_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[dict[str, Any]] = []

    async def capture(**kwargs: Any) -> Any:
        sent.append(kwargs)
        return SUMMARY

    monkeypatch.setattr(_side_call, "real_acompletion", lambda: capture)
    request = {
        "model": "openai/fake-model",
        "messages": [{"role": "user", "content": "agent prompt"}],
        "api_base": DEPLOYMENT,
        "api_key": "sk-deployment-key",
        "metadata": {"user_api_key_hash": "h", "user_api_key_team_id": "team-a"},
        "litellm_call_id": "c1",
        "litellm_logging_obj": object(),
        "stream": True,
        "tools": [{"type": "function", "function": {"name": "read"}}],
    }
    summary = [{"role": "user", "content": "summarise"}]
    await DeploymentCall(request)(model="openai/o1-pro", messages=summary, tools=None)
    assert sent == [
        {
            "model": "openai/fake-model",
            "messages": summary,
            "api_base": DEPLOYMENT,
            "api_key": "sk-deployment-key",
            "metadata": {"user_api_key_hash": "h", "user_api_key_team_id": "team-a"},
        }
    ]
