"""Stateless calls that name no conversation: found again by their head, in this process only.

A ``ctxmw.acompletion`` call without a save_file, ``session=`` or litellm session id still
belongs to a conversation: its caller sends the whole history every time. The proxy keys such a
call by the digest of its stable head (:func:`~ctxmw.runtime.identity.head_digest`: the system
messages and the first user message); the wrapper does the same, with two differences:

* **scoped to the process**: the session id carries the process id and a random part
  (``head-<digest>@<pid>.<random>``), so two processes (or two runs of one script) that open
  with the same words never share a session in the default ledger they both append to;
* **threads**: two different conversations can open with the same words (a task run twice, a
  batch of evaluations). A call continues the thread whose previous call's messages its own
  messages extend: the same count or more, and the same messages where that call's last two
  and its middle one were (sampled, not all: a call never digests the whole history); a call
  that extends none starts a new thread, ``...-2``, ``...-3``. Each thread is a
  conversation of its own (memo, telemetry recorder), so one conversation's call is never
  measured against another's payload: no made-up bust, no cache reads expected from a prefix
  the provider never saw from this conversation. A thread in use by a call still running is
  never given to another call.

The price: a conversation whose caller rewrites its own history (drops or edits a message)
continues as a new thread rather than as a bust of the old one. Callers that can name their
conversation (``session=``, ``litellm_session_id``) should.
"""

from __future__ import annotations

import functools
import hashlib
import os
import secrets
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxmw.messages.canonical import canonical_bytes
from ctxmw.runtime.identity import head_digest

__all__ = ["MAX_HEADS", "MAX_THREADS", "HeadThreads", "process_tag"]

MAX_HEADS = 1024
MAX_THREADS = 16
_DIGEST_HEX = 12


def process_tag() -> str:
    """``<pid>.<random>``: this process, told apart from an earlier one that had its pid."""
    return _tag(os.getpid())


@functools.cache
def _tag(pid: int) -> str:  # a forked child has another pid, hence a tag of its own
    return f"{pid}.{secrets.token_hex(2)}"


@dataclass(slots=True)
class _Thread:
    number: int
    length: int = 0  # messages of its latest call
    marks: bytes = b""  # digests of that call's messages at _sampled(length)
    session: str = ""


class HeadThreads:
    """Which thread of which head a call continues (bounded: least recently used heads go).

    Args:
        max_heads: heads remembered.
        max_threads: threads per head (the least recently used one is reused beyond it).
    """

    def __init__(self, max_heads: int = MAX_HEADS, max_threads: int = MAX_THREADS) -> None:
        self.max_heads, self.max_threads = max_heads, max_threads
        self._heads: OrderedDict[str, list[_Thread]] = OrderedDict()

    def session_for(self, messages: Sequence[Any], busy: Callable[[str], bool]) -> str:
        """The session id of the conversation ``messages`` continue (see the module docstring).

        Args:
            messages: the call's whole history, as OpenAI-format dicts.
            busy: whether a session id is in use by a call still running.
        """
        head = head_digest(messages)
        threads = self._threads(head)
        digests = _Digests(messages)
        thread = _best(threads, digests, busy) or self._new(head, threads)
        threads.remove(thread)
        threads.append(thread)  # most recently used last
        thread.length, thread.marks = len(messages), digests.marks(len(messages))
        return thread.session

    def _threads(self, head: str) -> list[_Thread]:
        threads = self._heads.get(head)
        if threads is None:
            threads = self._heads[head] = []
            while len(self._heads) > self.max_heads:
                self._heads.popitem(last=False)
        self._heads.move_to_end(head)
        return threads

    def _new(self, head: str, threads: list[_Thread]) -> _Thread:
        if len(threads) >= self.max_threads:
            threads.pop(0)
        number = max((t.number for t in threads), default=0) + 1
        session = f"head-{head[:_DIGEST_HEX]}@{process_tag()}"
        thread = _Thread(number, session=session if number == 1 else f"{session}-{number}")
        threads.append(thread)
        return thread


class _Digests:
    """Digests of a call's messages by index, each computed at most once."""

    def __init__(self, messages: Sequence[Any]) -> None:
        self.messages = messages
        self._done: dict[int, bytes] = {}

    def marks(self, length: int) -> bytes:
        """The digests of the first ``length`` messages at the sampled places, joined."""
        return b"".join(self._at(i) for i in (length - 1, length - 2, length // 2) if i >= 0)

    def _at(self, index: int) -> bytes:
        if index not in self._done:
            digest = hashlib.blake2b(canonical_bytes(self.messages[index]), digest_size=16)
            self._done[index] = digest.digest()
        return self._done[index]


def _best(threads: list[_Thread], digests: _Digests, busy: Callable[[str], bool]) -> _Thread | None:
    """The free thread whose latest call this one extends the most of, if any."""
    n = len(digests.messages)
    fits = [
        t
        for t in threads
        if t.length <= n and not busy(t.session) and digests.marks(t.length) == t.marks
    ]
    return max(fits, key=lambda t: t.length, default=None)
