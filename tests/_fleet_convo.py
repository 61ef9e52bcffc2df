"""A scripted agent conversation for the fleet tests, and the one-process oracle.

The client plays the agent: round ``i`` sends the history of ``i`` tool calls and results. The
oracle computes what one process would send and record (``prepare_prompt``'s chain and one
``CallRecorder``), so the fleet's prompts and ledger can be compared with it. A fleet measures
every call against the state the replicas share, which holds no message content (the leading
text a changed message keeps is measured from its text ladder, see
``ctxmw.telemetry._snapshot``): the oracle's recorder goes through that state between calls.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

from ctxmw.messages.form import without_none
from ctxmw.settings import Settings
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.telemetry.recorder import CallRecorder
from ctxmw.testing import text, usage
from ctxmw.types import Messages, StrategyContext

__all__ = ["FLEET_SETTINGS", "RECORD_FIELDS", "Oracle", "comparable", "history", "on_the_wire"]

# Small epochs, so compaction and an epoch boundary happen within twenty rounds.
FLEET_SETTINGS: dict[str, Any] = {
    "prompt_strategies": "shorten_tools_epoch_increment,inbox",
    "epoch_tool_call_threshold": 6,
    "epoch_size": 4,
    "epoch_full_tool_calls": 3,
    "epoch_compacted_tool_calls": 4,
}

RECORD_FIELDS = (
    "session",
    "round",
    "strategies",
    "messages_in",
    "messages_out",
    "calls_compacted",
    "calls_dropped",
    "epoch",
    "prompt_tokens_local",
    "prefix_tokens_local",
    "expected_cached_tokens",
    "bust",
    "payload_digest",
)
"""The ledger fields that must not depend on which replica served a call."""


def history(rounds: int, tag: str = "", lines: int = 40) -> Messages:
    """The conversation after ``rounds`` tool rounds (round 0: system and user only), each
    result ``lines`` lines long (about 40 bytes a line)."""
    messages: Messages = [
        {"role": "system", "content": f"You are a careful agent{tag}. Use the tools."},
        {"role": "user", "content": "Read every module and summarise the package."},
    ]
    for i in range(rounds):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "read", "arguments": f'{{"path": "src/module_{i}.py"}}'},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        body = "".join(f"line {j} of module {i}: value = {i * j}\n" for j in range(lines))
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": body})
    return messages


def chat_completion(
    prompt: int, cached: int, *, reply_id: str, model: str = "fake-model"
) -> dict[str, Any]:
    """An upstream's OpenAI chat-completion body: the answer "ok", with its cache reads."""
    return {
        "id": reply_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": 1,
            "total_tokens": prompt + 1,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


class Oracle:
    """What one process sends and records for one conversation."""

    def __init__(self, session: str, model: str, api_base: str) -> None:
        self.settings = Settings(**FLEET_SETTINGS)
        self.recorder = CallRecorder(session, settings=self.settings)
        self.model, self.api_base = model, api_base
        self.round = 0

    async def call(
        self, messages: Messages, notes: tuple[str, ...] = ()
    ) -> tuple[Messages, dict[str, Any]]:
        """The prompt one process sends for ``messages`` (plus inbox ``notes``) and its record."""
        ctx = StrategyContext(settings=self.settings, model=self.model)
        chain = [
            ("inbox", _notes(notes)) if name == "inbox" else (name, fn)
            for name, fn in resolve_strategies(self.settings.prompt_strategies, self.settings)
        ]
        trace: list[tuple[str, Messages]] = []
        prompt = await apply_strategies(copy.deepcopy(messages), chain, ctx, trace=trace)
        wire = {"model": self.model, "messages": prompt, "api_base": self.api_base}
        record = await self.recorder.record(
            model=self.model,
            wire_kwargs=wire,
            transcript=messages,
            trace=trace,
            stats=ctx.stats,
            response=text("ok", usage=usage(10, 1)),
            round=self.round,
        )
        self.round += 1
        carried = json.loads(json.dumps(self.recorder.export_state()))
        self.recorder = CallRecorder(self.recorder.session, settings=self.settings)
        self.recorder.restore_state(carried)
        return prompt, record.to_dict()


def _notes(notes: tuple[str, ...]) -> Any:
    def inbox(messages: Messages, ctx: StrategyContext) -> Messages:
        return [*messages, *({"role": "user", "content": n} for n in notes)]

    return inbox


def on_the_wire(prompts: list[Messages]) -> list[Messages]:
    """Prompts as litellm's OpenAI client sends them: keys whose value is None left out."""
    return [[without_none(m) for m in p] for p in prompts]


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """The fields of a ledger record that one process and a fleet must agree on."""
    return {name: record[name] for name in RECORD_FIELDS}
