"""A tool round left open at the end of a transcript, and how it is set aside.

An *open round* is an assistant message with tool calls at the end of the conversation, some
of whose calls have no result after it. Providers reject a prompt that holds one. Two things
leave one behind:

* a write cut short (a crash, a power loss) after the assistant line of a round ctxmw's loop
  had run: its tools ran, or some of them did, and their results were not saved;
* a response asking for the caller's tools, saved before the caller ran them: the caller's
  next ``run([...results])`` answers it.

An open round is never completed by running its tools again (a tool with side effects would
silently act twice) and never sent as it is. It is *set aside*: an edit record drops it from the
conversation, so it stays readable in the file as an earlier revision (``ctxmw show
--revisions``), and the model is asked again from the message before it. The loader sets aside a
round a torn write left with only some results; a session sets aside a round with no results
when the turn's input answers none of its calls (a ``run()`` that passes its results keeps it).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxmw.runtime.revisions import Edit
from ctxmw.types import Message, Messages

__all__ = ["aside_edit", "open_round", "report_aside", "set_aside_unanswered"]

logger = logging.getLogger("ctxmw")


def open_round(messages: Sequence[Message]) -> int:
    """How many trailing messages form an open tool round (0: the conversation ends closed)."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.get("role") == "tool":
            continue
        wanted = _call_ids(message)
        if not wanted:
            return 0
        answered = {m.get("tool_call_id") for m in messages[i + 1 :]}
        return 0 if wanted <= answered else len(messages) - i
    return 0


def aside_edit(size: int, count: int) -> Edit:
    """The edit that drops the last ``count`` of ``size`` messages (an open round)."""
    return Edit(((size - count, count, 0),), ())


def set_aside_unanswered(
    turn: Any, messages: Messages, given: Sequence[Message], path: Path | None
) -> Messages:
    """Set aside the open round ``messages`` ends with, unless ``given`` answers its calls.

    ``turn`` (a :class:`~ctxmw.runtime.turn.Turn` whose ``working`` is still ``messages``)
    then works without the round and records its removal with its first commit.

    Returns:
        The conversation the turn goes on from: ``messages``, without the round set aside.
    """
    count = open_round(messages)
    if not count:
        return messages
    round_ = messages[len(messages) - count :]
    if _call_ids(round_[0]) & {m.get("tool_call_id") for m in given if m.get("role") == "tool"}:
        return messages  # the caller answers it (run([...results])): the round goes on
    turn.working = turn.working[: len(turn.working) - count]
    turn.edit = aside_edit(len(messages), count)
    report_aside(path, round_, "no result for")
    return messages[: len(messages) - count]


def report_aside(path: Path | None, round_: Sequence[Message], why: str) -> None:
    """One WARNING naming the calls set aside (their names and ids, never their arguments)."""
    calls = [c for c in round_[0].get("tool_calls") or () if isinstance(c, dict)]
    names = ", ".join(f"{_name(c)} ({c.get('id')})" for c in calls)
    where = f"{path} ends" if path is not None else "the transcript ends"
    logger.warning(
        "ctxmw: %s with a tool round that has %s its %d call(s): %s. It is set aside: kept in the "
        "save_file as an earlier revision, not sent, and its tools are not run again. The "
        "model is asked again from the message before it.",
        where,
        why,
        len(calls),
        names,
    )


def _call_ids(message: Message) -> set[Any]:
    calls = message.get("tool_calls") if message.get("role") == "assistant" else None
    if not isinstance(calls, list):
        return set()
    return {c.get("id") for c in calls if isinstance(c, dict)}


def _name(call: dict[str, Any]) -> str:
    function = call.get("function")
    return str(function.get("name")) if isinstance(function, dict) else "?"
