"""Running one response's tool calls: concurrently, each under a timeout, never crashing the loop.

Whatever goes wrong with one call (unknown tool, arguments that are not a JSON object or do not
validate, the tool raising, the timeout) becomes an error text in that call's result, so the model
can react and the loop goes on. Two things are never turned into text: cancellation (and
``KeyboardInterrupt``), and :class:`~ctxmw.errors.Aborted`, which a tool may raise to stop the
agent on purpose.

Sync tools run in a daemon thread of their own. A sync tool that overruns its timeout is
abandoned (its thread finishes in the background; Python cannot kill it) and, being a daemon,
never keeps the process from exiting; an async tool is cancelled.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import anyio
from pydantic import BaseModel, ValidationError

from ctxmw.errors import Aborted
from ctxmw.messages.form import call_arguments, call_name
from ctxmw.runtime._loop import in_daemon_thread
from ctxmw.runtime.tool_schema import Tool, ToolSet
from ctxmw.types import Messages

__all__ = ["run_tool_calls"]


async def run_tool_calls(
    calls: Sequence[dict[str, Any]], tools: ToolSet, time_limit: float
) -> Messages:
    """Run ``calls`` concurrently; one ``tool`` message per call, in the order of ``calls``.

    Raises:
        Aborted: a tool raised it (the other calls are cancelled).
    """
    results: list[str] = [""] * len(calls)
    aborted: list[Aborted] = []
    async with anyio.create_task_group() as group:
        for i, call in enumerate(calls):
            group.start_soon(
                _run_into, results, i, call, tools, time_limit, aborted, group.cancel_scope
            )
    if aborted:
        raise aborted[0]
    return [
        {"role": "tool", "tool_call_id": str(call.get("id", "")), "content": text}
        for call, text in zip(calls, results, strict=True)
    ]


async def _run_into(
    results: list[str],
    i: int,
    call: dict[str, Any],
    tools: ToolSet,
    time_limit: float,
    aborted: list[Aborted],
    scope: anyio.CancelScope,
) -> None:
    try:
        results[i] = await _run_one(call, tools, time_limit)
    except Aborted as exc:  # ExceptionGroup would hide it from the caller: carry it out by hand
        aborted.append(exc)
        scope.cancel()


async def _run_one(call: dict[str, Any], tools: ToolSet, time_limit: float) -> str:
    name = call_name(call)
    tool = tools.executable.get(name)
    if tool is None:
        available = ", ".join(sorted(tools.executable)) or "none"
        return f"Error: there is no tool named {name!r}. Available tools: {available}."
    try:
        arguments = _validate(tool, call_arguments(call))
    except ValueError as exc:
        return f"Error: invalid arguments for tool {name!r}: {exc}"
    with anyio.move_on_after(time_limit) as scope:
        try:
            return _render(await _invoke(tool, arguments))
        except Aborted:
            raise
        except Exception as exc:
            return f"Error: tool {name!r} raised {type(exc).__name__}: {exc}"
    assert scope.cancelled_caught  # only the timeout reaches this line
    return f"Error: tool {name!r} did not finish within {time_limit:g} s and was stopped."


def _validate(tool: Tool, raw: Any) -> dict[str, Any]:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        raw = "{}"
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        raise ValueError(f"they are not valid JSON ({exc}); send a JSON object.") from exc
    if not isinstance(parsed, dict):
        raise ValueError(f"expected a JSON object, got {type(parsed).__name__}.")
    try:
        model = tool.arguments.model_validate(parsed)
    except ValidationError as exc:
        raise ValueError(_describe(exc)) from exc
    return {key: getattr(model, key) for key in type(model).model_fields}


async def _invoke(tool: Tool, arguments: dict[str, Any]) -> Any:
    if tool.is_async:
        return await tool.fn(**arguments)
    return await in_daemon_thread(functools.partial(tool.fn, **arguments))


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # circular structures
        return str(value)


def _describe(exc: ValidationError) -> str:
    parts = [
        f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
        for err in exc.errors()
    ]
    return "; ".join(parts) + "."
