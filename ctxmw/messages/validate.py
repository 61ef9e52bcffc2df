"""Wire validity: the tool-call pairing rules every provider enforces, checked in one pass.

A tool group is an assistant message with ``tool_calls`` and the tool messages right after it;
any other message (user, assistant, system) ends the group, and a call not answered by then is
an error. Results pair with the calls of their own group by id, so an id may come back in a
later group (real transcripts reuse ids such as ``call_0`` across turns); within one group ids
must be unique. Anthropic-native ``tool_use`` / ``tool_result`` content blocks are checked too
(:mod:`ctxmw.messages.blocks`): each tool_use is answered in the very next message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxmw.errors import InvalidTranscriptError
from ctxmw.messages.blocks import block_problems

__all__ = ["Pairing", "scan", "validate"]


@dataclass(slots=True)
class Pairing:
    """What :func:`scan` found.

    Attributes:
        problems: ``(index, description)`` of every problem, in index order.
        answered: ``(assistant index, call id)`` of every call answered before the next turn.
        results: indices of tool messages that answer a call.
        malformed: indices of messages that are not dicts or have no role.
        bad_tool_calls: indices of assistant messages whose ``tool_calls`` is not a list, or
            is an empty one.
    """

    problems: list[tuple[int, str]] = field(default_factory=list)
    answered: set[tuple[int, str]] = field(default_factory=set)
    results: set[int] = field(default_factory=set)
    malformed: set[int] = field(default_factory=set)
    bad_tool_calls: set[int] = field(default_factory=set)


def validate(messages: Sequence[Any]) -> None:
    """Check ``messages`` against the tool-call wire rules; return None when they hold.

    Raises:
        InvalidTranscriptError: names the first problem and the index of its message: a message
            with no role, ``tool_calls`` that is not a list or is empty, a tool_call id used
            twice in one message, a tool message answering no call of its group, or a
            tool_call with no result before the next message that is not a tool result (a
            user, assistant or system message) or the end; a ``tool_use`` content block not
            answered by a ``tool_result`` block in the next message, or a ``tool_result`` block
            answering none there.
    """
    problems = scan(messages).problems
    if problems:
        index, text = problems[0]
        raise InvalidTranscriptError(text, index)


def scan(messages: Sequence[Any]) -> Pairing:
    """Every pairing problem of ``messages`` and what does pair, in one pass."""
    out = Pairing()
    open_calls: dict[str, int] = {}
    seen: set[str] = set()
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, dict) else None
        if not isinstance(role, str) or not role:
            out.malformed.add(i)
            out.problems.append((i, "the message has no role (or is not a dict)"))
            continue
        if role == "tool":
            _answer(out, open_calls, seen, i, msg.get("tool_call_id"))
            continue
        _close_turn(out, open_calls, role, i)
        if role == "assistant":
            _open_calls(out, open_calls, seen, i, msg.get("tool_calls"))
    _close_turn(out, open_calls, "end of the transcript", len(messages))
    out.problems += block_problems(messages)
    out.problems.sort(key=lambda problem: problem[0])
    return out


def _close_turn(out: Pairing, open_calls: dict[str, int], what: str, i: int) -> None:
    for call_id, at in open_calls.items():
        where = what if what.startswith("end") else f"the {what} message at {i}"
        out.problems.append((at, f"tool_call {call_id!r} has no result before {where}"))
    open_calls.clear()


def _open_calls(
    out: Pairing, open_calls: dict[str, int], seen: set[str], i: int, tool_calls: Any
) -> None:
    if tool_calls is None:
        return
    if not isinstance(tool_calls, list) or not tool_calls:
        out.bad_tool_calls.add(i)
        what = "an empty list" if isinstance(tool_calls, list) else f"a {type(tool_calls).__name__}"
        out.problems.append(
            (i, f"tool_calls is {what}; providers want a non-empty list, or no tool_calls key")
        )
        return
    for tc in tool_calls:
        call_id = tc.get("id") if isinstance(tc, dict) else None
        if not isinstance(call_id, str):
            out.problems.append((i, f"a tool_call has no string id: {tc!r:.80}"))
        elif call_id in open_calls:
            out.problems.append((i, f"duplicate tool_call id {call_id!r} in one message"))
        else:
            seen.add(call_id)
            open_calls[call_id] = i


def _answer(out: Pairing, open_calls: dict[str, int], seen: set[str], i: int, call_id: Any) -> None:
    if isinstance(call_id, str) and call_id in open_calls:
        out.answered.add((open_calls.pop(call_id), call_id))
        out.results.add(i)
    elif isinstance(call_id, str) and call_id in seen:
        out.problems.append(
            (i, f"tool message answers {call_id!r}, which is not a call of its tool group")
        )
    else:
        out.problems.append((i, f"tool message's tool_call_id {call_id!r} has no earlier call"))
