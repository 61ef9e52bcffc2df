"""read_usage on real litellm responses, each provider served by respx through litellm's httpx."""

from __future__ import annotations

from typing import Any

import httpx
import litellm
import pytest
import respx

from ctxmw.telemetry.usage import read_stream_usage, read_usage, with_stream_usage
from tests import _provider_bodies as bodies

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.setenv(key, "fake-key")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFAKEFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret")
    monkeypatch.setenv("AWS_REGION_NAME", "us-east-1")


CASES = [
    # model, URL litellm must call, body, prompt, reads, writes (None: the provider reports none)
    ("gpt-4o", "https://api.openai.com/v1/chat/completions", bodies.OPENAI, 2006, 1920, None),
    (
        "anthropic/claude-sonnet-4-5-20250929",
        "https://api.anthropic.com/v1/messages",
        bodies.ANTHROPIC,
        50 + 248 + 1800,
        1800,
        248,
    ),
    (
        "gemini/gemini-2.5-flash",
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
        bodies.GEMINI,
        2100,
        1024,
        None,
    ),
    (
        "bedrock/converse/anthropic.claude-3-5-sonnet-20240620-v1:0",
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
        "anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse",
        bodies.BEDROCK_CONVERSE,
        40 + 1500 + 800,
        1500,
        800,
    ),
    (
        "deepseek/deepseek-chat",
        "https://api.deepseek.com/beta/chat/completions",
        bodies.DEEPSEEK,
        1500,
        1280,
        None,
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("model", "url", "body", "prompt", "reads", "writes"), CASES)
async def test_provider_cache_fields_read_right(
    model: str, url: str, body: dict[str, Any], prompt: int, reads: int, writes: int | None
) -> None:
    with respx.mock(using="httpx") as router:
        route = router.post(url).mock(return_value=httpx.Response(200, json=body))
        response = await litellm.acompletion(model=model, messages=MESSAGES)
    assert route.call_count == 1
    report = read_usage(response)
    assert (report.prompt_tokens, report.cache_read_tokens, report.cache_write_tokens) == (
        prompt,
        reads,
        writes,
    )
    assert not report.estimated


def test_top_level_extras_are_the_fallback() -> None:
    usage = {"prompt_tokens": 900, "completion_tokens": 3, "cache_read_input_tokens": 512}
    usage["cache_creation_input_tokens"] = 128
    report = read_usage({"usage": usage})
    assert (report.cache_read_tokens, report.cache_write_tokens) == (512, 128)


def test_missing_usage_is_estimated() -> None:
    assert read_usage(None).estimated
    assert read_usage({"id": "x", "usage": None}).estimated


async def _stream(model: str, url: str, text: str, **kwargs: Any) -> tuple[list[Any], Any]:
    with respx.mock(using="httpx") as router:
        headers = {"content-type": "text/event-stream"}
        router.post(url).mock(return_value=httpx.Response(200, text=text, headers=headers))
        stream = await litellm.acompletion(model=model, messages=MESSAGES, stream=True, **kwargs)
        chunks = [chunk async for chunk in stream]
    return chunks, stream


@pytest.mark.anyio
async def test_openai_stream_usage_is_reported() -> None:
    kwargs = dict(with_stream_usage({"stream": True}, "gpt-4o"))
    kwargs.pop("stream")
    url = "https://api.openai.com/v1/chat/completions"
    chunks, stream = await _stream("gpt-4o", url, bodies.openai_stream(True), **kwargs)
    report = read_stream_usage(chunks, stream)
    assert (report.prompt_tokens, report.cache_read_tokens, report.estimated) == (2000, 1920, False)


@pytest.mark.anyio
async def test_openai_stream_without_usage_is_marked_estimated() -> None:
    url = "https://api.openai.com/v1/chat/completions"
    chunks, stream = await _stream(
        "gpt-4o", url, bodies.openai_stream(False), stream_options={"include_usage": True}
    )
    assert read_stream_usage(chunks, stream).estimated


@pytest.mark.anyio
async def test_anthropic_stream_usage_comes_from_hidden_params() -> None:
    model, url = "anthropic/claude-sonnet-4-5", "https://api.anthropic.com/v1/messages"
    chunks, stream = await _stream(model, url, bodies.anthropic_stream())
    report = read_stream_usage(chunks, stream)
    assert (report.cache_read_tokens, report.cache_write_tokens) == (1800, 248)
    assert (report.prompt_tokens, report.completion_tokens, report.estimated) == (2098, 15, False)


def test_with_stream_usage_only_where_supported() -> None:
    assert with_stream_usage({"stream": True}, "gpt-4o")["stream_options"] == {
        "include_usage": True
    }
    assert "stream_options" not in with_stream_usage(
        {"stream": True}, "anthropic/claude-sonnet-4-5"
    )
    assert "stream_options" not in with_stream_usage({}, "gpt-4o")
    mine = {"stream": True, "stream_options": {"include_usage": False}}
    assert with_stream_usage(mine, "gpt-4o") is mine
