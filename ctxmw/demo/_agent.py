"""The demo agent's next move, decided from the prompt it is sent, as a model decides.

The agent follows its plan (:mod:`ctxmw.demo._script`): the newest step id in the prompt says
where it is. Before a step that copies text from an earlier result, it looks for that text in
the prompt it was sent. When the prompt no longer shows it, the agent gets it back first, as a
coding agent does: through ``ctxmw_expand`` when the prompt shows the result compacted under a
read-back handle, else by running the read or the search again. Either costs one more model
call; then the step goes ahead with what it fetched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ctxmw.context.readback import READBACK_TOOL_NAME, handles_in
from ctxmw.context.survival import content_text, message_text
from ctxmw.demo._script import Call, Need, PlanStep

__all__ = ["next_calls", "step_of"]

_STEP_ID = re.compile(r"^call_(\d+)_\d+$")


def next_calls(plan: Sequence[PlanStep], messages: Sequence[Any]) -> list[dict[str, Any]] | None:
    """The tool calls of the agent's next reply to ``messages``; None once the plan is done."""
    step = 1 + max((step_of(m) for m in messages if isinstance(m, dict)), default=-1)
    if step >= len(plan):
        return None
    fetches = _fetches(plan[step].needs, messages, step)
    if fetches:
        return [_call(f"call_{step:04d}_f{j}", call) for j, call in enumerate(fetches)]
    return [_call(f"call_{step:04d}_{j}", call) for j, call in enumerate(plan[step].calls)]


def step_of(message: dict[str, Any]) -> int:
    """The newest plan step whose calls ``message`` makes (-1: none; fetches do not count)."""
    steps = [
        int(match.group(1))
        for tc in message.get("tool_calls") or []
        if isinstance(tc, dict) and (match := _STEP_ID.match(str(tc.get("id", ""))))
    ]
    return max(steps, default=-1)


def _fetches(needs: Sequence[Need], messages: Sequence[Any], step: int) -> list[Call]:
    """The calls that show again what the step needs and the prompt does not show; none once
    the agent fetched for this step (it then acts on what it got)."""
    if not needs or _fetched(messages, step):
        return []
    seen = "\n".join(message_text(m) for m in messages)
    calls: list[Call] = []
    for need in needs:
        if all(text in seen for text in need.text):
            continue
        handle = _handle(messages, need.source)
        call = (READBACK_TOOL_NAME, {"handle": handle, **need.readback}) if handle else need.again
        if call not in calls:
            calls.append(call)
    return calls


def _fetched(messages: Sequence[Any], step: int) -> bool:
    prefix = f"call_{step:04d}_f"
    return any(
        isinstance(m, dict) and str(m.get("tool_call_id", "")).startswith(prefix) for m in messages
    )


def _handle(messages: Sequence[Any], source: str) -> str | None:
    """The read-back handle the prompt shows for the result of call ``source``, if any."""
    for message in messages:
        if isinstance(message, dict) and message.get("tool_call_id") == source:
            found = handles_in(content_text(message.get("content")))
            return found[0] if found else None
    return None


def _call(call_id: str, call: Call) -> dict[str, Any]:
    name, arguments = call
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": call_id, "type": "function", "function": function}
