"""A readable view of a transcript, for ``ctxmw show SAVE_FILE``.

One block per message: its index, its role, the tool it calls or answers, its size in
characters (of its text and its calls' names and arguments: what the model reads, not the JSON
around it), and its text. Long parts (tool outputs, argument strings, any content over the width)
are folded to one line with the number of characters hidden; ``full=True`` prints everything.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ctxmw.messages.form import call_name, tool_calls_of
from ctxmw.types import Message

__all__ = ["format_transcript"]


def format_transcript(messages: Sequence[Message], *, full: bool = False, width: int = 100) -> str:
    """Render ``messages`` as text, one block per message.

    Args:
        messages: a transcript (OpenAI-format dicts).
        full: print every part whole instead of folding long ones.
        width: characters shown of a folded part.
    """
    names = _call_names(messages)
    blocks = [_block(i, m, names, full, width) for i, m in enumerate(messages)]
    calls = sum(len(m.get("tool_calls") or []) for m in messages)
    chars = sum(_size(m) for m in messages)
    blocks.append(f"-- {len(messages)} messages, {calls} tool calls, {chars} characters")
    return "\n".join(blocks)


def _block(i: int, message: Message, names: dict[str, str], full: bool, width: int) -> str:
    role = str(message.get("role", "?"))
    head = f"#{i:<4} {role:<9} {_size(message):>7} chars"
    if role == "tool":
        call_id = str(message.get("tool_call_id", ""))
        head += f"  <- {names.get(call_id, '?')} [{call_id}]"
    lines = [head]
    text = _text(message.get("content"))
    if text:
        lines.append("      " + _fold(text, full, width))
    for call in message.get("tool_calls") or []:
        lines.append("      -> " + _call(call, full, width))
    return "\n".join(lines)


def _call(call: Any, full: bool, width: int) -> str:
    fn = call.get("function", {}) if isinstance(call, dict) else {}
    args = fn.get("arguments", "")
    try:
        parsed = json.loads(args) if isinstance(args, str) and args.strip() else {}
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        shown = ", ".join(
            f"{k}={_fold(json.dumps(v), full, width // 2)}" for k, v in parsed.items()
        )
    else:
        shown = _fold(str(args), full, width)
    return f"{fn.get('name', '?')}({shown}) [{call.get('id', '?')}]"


def _fold(text: str, full: bool, width: int) -> str:
    if full:
        return text
    flat = text.replace("\n", "\\n")
    if len(flat) <= width:
        return flat
    return f"{flat[:width]}... [{len(flat) - width} more chars folded]"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p.get("text", f"<{p.get('type', 'part')}>") for p in content if isinstance(p, dict)
        ]
        return " ".join(str(p) for p in parts)
    return ""


def _size(message: Message) -> int:
    size = len(_text(message.get("content")))
    for call in tool_calls_of(message):
        fn = call.get("function")
        if isinstance(fn, dict):
            size += len(str(fn.get("name") or "")) + len(str(fn.get("arguments") or ""))
    return size


def _call_names(messages: Sequence[Message]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for call in tool_calls_of(message):
            names[str(call.get("id"))] = call_name(call) or "?"
    return names
