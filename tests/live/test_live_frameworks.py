"""The live tier, inside a framework: openai-agents' LitellmModel passes ``base_url``.

ctxmw must read it like ``api_base``: a self-hosted server is cached ``exact``ly, and ctxmw's
expected cache reads follow what llama.cpp's server reports (issue 11: with ``base_url`` ignored
the rule was ``openai`` and ctxmw expected 0 cached tokens while the server read most of each
prompt). Plain chat turns, no tools (the 135M model's replies do not matter, only the prompts).
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest

import ctxmw
from ctxmw.telemetry import CallRecord

agents = pytest.importorskip("agents")
litellm_model = pytest.importorskip("agents.extensions.models.litellm_model")

pytestmark = [pytest.mark.live, pytest.mark.anyio]

MODEL = "openai/smollm2"
TOLERANCE = 0.1
"""Largest allowed gap between the expected and the reported cached fraction of a call (the two
sides count with different tokenizers, see test_live_cache.py)."""

QUESTIONS = [
    "Name one prime number.",
    "Name another one.",
    "And a third?",
    "Which of them is the largest?",
]


def instructions(nonce: str) -> str:
    # A nonce first, so a server's cache of an earlier run cannot serve this one.
    facts = " ".join(f"Fact {n}: the number {n * 7} is a multiple of seven." for n in range(40))
    return f"[{nonce}] You answer in a few words. {facts}"


async def test_base_url_counts_like_api_base_against_a_real_cache(live_api_base: str) -> None:
    agents.set_tracing_disabled(True)
    records: list[CallRecord] = []
    nonce = uuid4().hex[:12]
    settings = agents.ModelSettings(
        max_tokens=4,
        temperature=0.0,
        extra_args={
            "prompt_strategies": ["none"],
            "session": f"live-agents-{nonce}",
            "on_call": [records.append],
        },
    )
    agent = agents.Agent(
        name="live",
        instructions=instructions(nonce),
        model=litellm_model.LitellmModel(model=MODEL, base_url=live_api_base, api_key="x"),
        model_settings=settings,
    )
    history: list[Any] = []
    with ctxmw.patch_litellm():
        for question in QUESTIONS:
            result = await agents.Runner.run(
                agent, [*history, {"role": "user", "content": question}]
            )
            history = result.to_input_list()
    assert [r.cache_rule for r in records] == ["exact"] * len(QUESTIONS)
    lines = []
    for k, r in enumerate(records[1:], start=2):
        expected = r.expected_cached_tokens / r.prompt_tokens_local
        reported = r.cache_read_tokens / r.prompt_tokens
        lines.append(f"call {k}: expected {expected:.3f}, reported {reported:.3f}")
        assert r.cache_read_tokens > 0
        assert abs(expected - reported) <= TOLERANCE, "\n".join(lines)
    print("\n".join(lines))
