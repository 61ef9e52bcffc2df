"""What reading back costs in a replay, and the constant head real agents send.

**Read-backs.** At a call point whose recorded next action uses a reference that the prompt
shows only behind a read-back handle (:mod:`ctxmw.replay.loss`: *recoverable*), the model must
first call ``ctxmw_expand`` and be called again. Replay prices that as one more call at that
point: the same prompt, which the first call has just cached, plus the read-back's call and its
answer as new input, and the read-back call's own output tokens. The round is ephemeral, as
ctxmw sends it: later prompts do not carry it.

What the model reads (:func:`readback_round`): per original, the lines holding the references
it needs and :data:`CONTEXT` lines around them, at most ``readback_max_chars`` characters,
answered exactly as :func:`ctxmw.context.readback.read_back` answers a real call.

**The head** (:func:`head_message`): real agents send a system prompt and tool definitions of
15-20k tokens on every call (Claude Code does); the recorded transcripts lack them. Replay's
``head_tokens`` puts one system message of about that many tokens before every transcript, so
ratios are taken over what a real agent pays.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxmw.context._record import handle_for
from ctxmw.context.readback import READBACK_TOOL_NAME, read_back
from ctxmw.messages.numbering import numbering
from ctxmw.replay.caching import Split
from ctxmw.replay.loss import Lost
from ctxmw.telemetry.counters import TokenCounter
from ctxmw.types import Message

__all__ = ["CONTEXT", "Readback", "head_message", "readback_round"]

CONTEXT = 20
"""Lines read around the lines a read-back needs, before the first and after the last."""


@dataclass(frozen=True, slots=True)
class Readback:
    """The extra call one call point paid to read back what its next action needed.

    Attributes:
        prompt_tokens: tokens of that call's prompt (the point's prompt and the read-back).
        output_tokens: tokens of the read-back call the model wrote.
        splits: cache reads and writes per caching model.
        cost: USD per caching model, the output tokens included.
    """

    prompt_tokens: int
    output_tokens: int
    splits: dict[str, Split]
    cost: dict[str, float]


def readback_round(
    messages: Sequence[Any], point: int, lost: Sequence[Lost], max_chars: int
) -> list[Message]:
    """The read-back the model makes at ``point``: one ``ctxmw_expand`` call per original that
    holds a recoverable reference, and their answers (empty when nothing is recoverable)."""
    wanted: dict[int, list[str]] = {}
    for item in lost:
        if item.recoverable:
            wanted.setdefault(item.pointed, []).append(item.text)
    calls: list[dict[str, Any]] = []
    answers: list[Message] = []
    for k, (j, texts) in enumerate(sorted(wanted.items())):
        content = str(messages[j]["content"])
        handle = handle_for(str(messages[j].get("tool_call_id")), content)
        args = {"handle": handle, **_lines_around(content, texts)}
        call_id = f"ctxmw-readback-{point}-{k}"
        calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": READBACK_TOOL_NAME, "arguments": json.dumps(args)},
            }
        )
        answer = read_back(content, handle, args, max_chars)
        answers.append({"role": "tool", "tool_call_id": call_id, "content": answer})
    if not calls:
        return []
    return [{"role": "assistant", "content": None, "tool_calls": calls}, *answers]


def _lines_around(content: str, texts: Sequence[str]) -> dict[str, int]:
    """``start`` and ``end`` (as the result numbers its lines) around the lines holding
    ``texts``; the whole result when no single line holds one (a string across lines)."""
    lines = content.splitlines()
    rows = [i for i, line in enumerate(lines) if any(text in line for text in texts)]
    numbers = numbering(lines).numbers
    if not rows or not numbers:
        return {"start": 1, "end": -1}
    first = max(min(rows) - CONTEXT, 0)
    last = min(max(rows) + CONTEXT, len(lines) - 1)
    return {"start": numbers[first], "end": numbers[last]}


def head_message(tokens: int, counter: TokenCounter, model: str) -> Message:
    """A system message of about ``tokens`` tokens (by ``counter``): the constant head a real
    agent sends, standing in for its system prompt and tool definitions."""
    words = max(tokens, 1)
    text = _filler(words)
    for _ in range(3):  # the counter's tokens per word are not known in advance
        counted = counter.message_tokens(model, {"role": "system", "content": text})
        if counted <= 0 or abs(counted - tokens) <= max(tokens // 200, 4):
            break
        words = max(round(words * tokens / counted), 1)
        text = _filler(words)
    return {"role": "system", "content": text}


def _filler(words: int) -> str:
    vocabulary = ("agent", "tool", "file", "read", "edit", "test", "shell", "output")
    return " ".join(f"{vocabulary[i % len(vocabulary)]}" for i in range(words))
