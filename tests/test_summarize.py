"""The ``summarize`` strategy: a checked model summary, cached and stepped, else truncation."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import litellm
import pytest

import ctxmw
from ctxmw import Settings, budget, validate
from ctxmw.strategies.summarize import ALIGNED_MARK, Summarize, clear_cache
from ctxmw.types import Messages, StrategyContext
from tests.transcripts import DURABLE_LINES, durable_trace, quarter_counter

summarize = Summarize(counter=quarter_counter)
FAITHFUL = "The agent investigated the delivery.\n" + "\n".join(DURABLE_LINES)


class FakeCompletion:
    """A scripted async completion: returns each answer in turn (an exception is raised)."""

    def __init__(self, *answers: str | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, **kwargs: Any) -> litellm.ModelResponse:
        self.requests.append(kwargs)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return litellm.ModelResponse(
            choices=[{"message": {"role": "assistant", "content": answer}}]
        )


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


def settings_for(messages: Messages, **overrides: Any) -> Settings:
    window = int(budget(messages, counter=quarter_counter).total / 0.8) + 4096
    return Settings(context_window=window, **overrides)


def run(messages: Messages, fake: Callable[..., Any], s: Settings) -> tuple[Messages, Any]:
    ctx = StrategyContext(settings=s, completion=fake)
    return anyio.run(summarize, messages, ctx), ctx


def test_the_model_summary_replaces_the_older_part() -> None:
    msgs = durable_trace()
    fake = FakeCompletion(FAITHFUL)
    s = settings_for(msgs, summary_model="cheap-model", summary_mode="cheap")
    out, ctx = run(msgs, fake, s)
    validate(out)
    assert out[2]["role"] == "user"
    assert out[2]["content"].endswith(FAITHFUL)
    assert ctx.stats["summarize"] == {**ctx.stats["summarize"], "folded": 20, "source": "model"}
    request = fake.requests[0]
    assert request["model"] == "cheap-model"
    prompt = " ".join(request["messages"][0]["content"].split())
    assert "Keep every identifier" in prompt
    assert "every amount and every explicit decision" in prompt
    assert "- ORD-1042" in request["messages"][0]["content"].splitlines()
    assert "step 9 done" in request["messages"][1]["content"]


def test_a_summary_that_drops_an_id_is_rejected(caplog: pytest.LogCaptureFixture) -> None:
    msgs = durable_trace()
    lossy = FAITHFUL.replace("RA123456789DE", "a parcel")
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        out, ctx = run(msgs, FakeCompletion(lossy), settings_for(msgs))
    assert "dropped 1 durable item(s)." in caplog.text
    assert "RA123456789DE" not in caplog.text  # message content never reaches the logs
    assert ctx.stats["summarize"]["source"] == "fallback"
    assert "a parcel" not in out[2]["content"]
    assert all(line in out[2]["content"] for line in DURABLE_LINES)
    validate(out)


def test_a_failing_call_falls_back_to_truncation(caplog: pytest.LogCaptureFixture) -> None:
    msgs = durable_trace()
    with caplog.at_level(logging.WARNING, logger="ctxmw"):
        failure = TimeoutError("provider said: RA123456789DE is not a parcel")
        out, _ = run(msgs, FakeCompletion(failure), settings_for(msgs))
    assert "summary call to 'gpt-4o-mini' failed (TimeoutError)." in caplog.text
    assert "RA123456789DE" not in caplog.text  # a provider's error text may quote the prompt
    assert out[2]["content"].startswith("[Summary of 20 earlier messages")


def test_the_prefix_is_byte_stable_within_a_step_and_the_model_is_asked_once() -> None:
    msgs = durable_trace()
    s = settings_for(msgs[:38])
    fake = FakeCompletion(FAITHFUL)
    first, _ = run(msgs[:38], fake, s)
    second, ctx = run(msgs, fake, s)
    assert ctx.stats["summarize"]["cached"] is True
    dumped = [json.dumps(m, sort_keys=True) for m in second]
    assert dumped[: len(first)] == [json.dumps(m, sort_keys=True) for m in first]
    assert len(second) == len(first) + 2
    assert len(fake.requests) == 1


def test_the_next_step_folds_a_new_range() -> None:
    msgs = durable_trace(turns=29)  # ten turns (20 messages, one step) more than the default
    s = settings_for(msgs[:38])
    fake = FakeCompletion(FAITHFUL, FAITHFUL)
    run(msgs[:38], fake, s)
    _, ctx = run(msgs, fake, s)
    assert ctx.stats["summarize"]["folded"] == 40
    assert len(fake.requests) == 2


def test_below_the_trigger_the_model_is_not_called() -> None:
    msgs = durable_trace()
    out, _ = run(msgs, FakeCompletion(), Settings(context_window=1_000_000))
    assert out is msgs


def test_without_an_injected_function_litellm_acompletion_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    msgs = durable_trace()
    fake = FakeCompletion(FAITHFUL)
    monkeypatch.setattr(litellm, "acompletion", fake)
    ctx = StrategyContext(settings=settings_for(msgs))
    out = anyio.run(summarize, msgs, ctx)
    assert len(fake.requests) == 1
    assert out[2]["content"].endswith(FAITHFUL)


def test_an_aligned_request_is_the_prompt_plus_one_instruction_to_the_agents_model() -> None:
    msgs = durable_trace()
    fake = FakeCompletion(FAITHFUL)
    ctx = StrategyContext(settings=settings_for(msgs), completion=fake, model="agent-model")
    out = anyio.run(summarize, msgs, ctx)
    request = fake.requests[0]
    assert request["model"] == "agent-model"
    assert "tools" not in request  # the session fills in its own tools and connection
    assert request["messages"][:-1] == msgs
    instruction = request["messages"][-1]
    assert instruction["role"] == "user"
    assert instruction["content"].startswith(ALIGNED_MARK)
    kept = len(msgs) - 22  # the head (system, task) and 20 folded messages
    assert f"except the last {kept} message(s)" in instruction["content"]
    for heading in ("## Intent", "## Decisions", "## Files", "## Open items", "## Identifiers"):
        assert heading in instruction["content"]
    assert "- ORD-1042" in instruction["content"].splitlines()
    assert "earlier summary" not in instruction["content"]
    assert out[2]["content"].endswith(FAITHFUL)


def test_the_next_aligned_fold_is_anchored_on_the_summary_already_sent() -> None:
    msgs = durable_trace(turns=29)
    s = settings_for(msgs[:38])
    fake = FakeCompletion(FAITHFUL, FAITHFUL)
    memo: dict[str, Any] = {}
    first_ctx = StrategyContext(settings=s, completion=fake, model="m", memo=memo)
    first = anyio.run(summarize, msgs[:38], first_ctx)
    ctx = StrategyContext(settings=s, completion=fake, model="m", memo=memo)
    anyio.run(summarize, msgs, ctx)
    request = fake.requests[1]["messages"]
    # The agent's prompt as it stands (the earlier summary in place), plus one instruction.
    assert request[:-1] == [*first, *msgs[38:]]
    assert "including the earlier summary" in request[-1]["content"]
    assert ctx.stats["summarize"]["folded"] == 40


def test_summary_mode_is_checked() -> None:
    with pytest.raises(ctxmw.SettingsError, match="summary_mode"):
        Settings(summary_mode="fancy")
