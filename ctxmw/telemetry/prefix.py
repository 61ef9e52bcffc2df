"""The local prefix estimate: how much of this call's payload repeats the previous call's.

One ``PrefixTracker`` per session. Each call it takes the wire payload as sent (tools, then the
messages after the strategies), and returns the local prompt size and the tokens of the longest
common prefix of whole blocks with the previous call: the tools list counts as the first block
(a changed tools list invalidates everything after it), then each message. It also measures the
leading text the first differing message shares with the previous call's message at that place
(``partial_tokens``): a token-granular cache (llama.cpp's) reads that too, a block cache does not.
Such a cache also holds the tokens it generated for the previous call: when this call's payload
extends the previous one with exactly the reply the previous call got (see :meth:`note_reply`),
that message is counted as ``reply_tokens``.

Cost per call grows with the messages that are new since the previous call: the payload is
compared with the previous one by object identity in C (see :mod:`~ctxmw.history`),
only the messages whose object changed are digested, only digests never counted are tokenized,
the cumulative sums of the common part are reused, and the payload digest extends the previous
one's hash state when the previous payload is a prefix of this one. What is held between calls
is the last payload (a list of references), its digests and counts (a snapshot, see
:mod:`~ctxmw.telemetry._snapshot`), and a token memo bounded by the payload's size.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

import anyio
import anyio.lowlevel

from ctxmw.history import DigestSlots, compare_prefix
from ctxmw.messages.canonical import tools_digest
from ctxmw.telemetry._snapshot import (
    ReplyKey,
    Snapshot,
    extend_layers,
    ladder_shared,
    layer_totals,
    marked_prefix,
    payload_hash,
    reply_key,
    shared_text,
    snapshot_from_json,
    snapshot_json,
    system_at,
    tools_marked,
)
from ctxmw.telemetry.counters import (
    LiteLLMCounter,
    TokenCounter,
    template_tools_tokens,
    text_tokens,
)
from ctxmw.telemetry.marks import injected_indices

__all__ = [
    "PrefixResult",
    "PrefixTracker",
    "ReplyKey",
    "common_prefix_length",
    "reply_key",
    "shared_text",
]


@dataclass(frozen=True, slots=True)
class PrefixResult:
    """The local estimate for one call.

    Attributes:
        prompt_tokens: local token count of the whole payload.
        prefix_tokens: tokens of the longest common prefix (whole blocks) with the previous call.
        common_messages: messages in that common prefix.
        first_diff: index of the first message that differs from the previous call's payload
            (``len(previous)`` when the previous payload is reused whole); None on a first call.
        broke: the previous payload is not a prefix of this one (a cache bust).
        tools_changed: the tools list differs from the previous call's.
        marked_prefix_tokens: tokens up to the last block that carried a ``cache_control`` mark
            in the previous call and lies inside the common prefix (what a breakpoint-caching
            provider can read); 0 when there is none.
        payload_digest: hex digest of the canonical payload.
        message_digests: per-message digests of this payload.
        layer_tokens: local tokens per layer of the messages: ``system``, ``history``,
            ``tool_results`` and ``current`` (the newest user message), as ``ctxmw.budget``
            defines them; kept cumulatively, so each call only adds its new messages.
        cumulative_tokens: ``cumulative_tokens[i]`` = local tokens of the first ``i`` messages
            (shared with the tracker: do not modify).
        tools_tokens: local tokens of the tools list.
        partial_tokens: tokens of the leading text (cut at a word boundary) that the first
            differing message shares with the previous payload's message at the same index,
            when both have the same role and text content; 0 otherwise.
        reply_tokens: tokens of the message right after the previous payload when it is the
            reply the previous call returned (a token cache generated it: it holds it); 0
            otherwise.
        system_changed: the first message that differs from the previous payload is a system
            or developer message (in either payload).
        marked: indices of this payload's messages that carry a mark (own or injected).
    """

    prompt_tokens: int
    prefix_tokens: int
    common_messages: int
    first_diff: int | None
    broke: bool
    tools_changed: bool
    marked_prefix_tokens: int
    payload_digest: str
    message_digests: list[bytes] = field(repr=False)
    layer_tokens: dict[str, int] = field(default_factory=dict)
    cumulative_tokens: Sequence[int] = field(default_factory=lambda: [0], repr=False)
    tools_tokens: int = 0
    partial_tokens: int = 0
    reply_tokens: int = 0
    system_changed: bool = False
    marked: frozenset[int] = frozenset()


# Messages counted per loop step by count_ahead (a few milliseconds of litellm's counting, at
# ~0.1 ms a message).
_COUNT_CHUNK = 64
# Slack of the token memo past the payload's own messages before it is trimmed to them.
_MEMO_SLACK = 256


class PrefixTracker:
    """Tracks one session's payloads and measures each call's reusable prefix.

    Args:
        counter: counts tokens; defaults to litellm's ``token_counter``.
        digests: the digest slots to share with other per-call bookkeeping (the recorder's
            transcript and strategy outputs); the tracker ends the call at the end of each
            ``observe``.
    """

    def __init__(
        self, counter: TokenCounter | None = None, digests: DigestSlots | None = None
    ) -> None:
        self._counter: TokenCounter = counter if counter is not None else LiteLLMCounter()
        self._digests = digests if digests is not None else DigestSlots()
        self._tools_key: tuple[object, tuple[int, ...], bytes] | None = None
        self._tokens: dict[bytes, int] = {}
        self._tools_tokens: dict[tuple[str, bytes, bool, bool], int] = {}
        self._previous: Snapshot | None = None
        self._reply: bytes | None = None  # the digest of the last reply's ReplyKey

    def note_reply(self, reply: Mapping[str, Any] | None) -> None:
        """Remember the reply the last observed call got (None: no usable reply)."""
        self._reply = _reply_digest(reply) if reply is not None else None

    @property
    def held_tokens(self) -> int:
        """Tokens of the payload kept for the next call's comparison (its messages are held)."""
        prev = self._previous
        return 0 if prev is None else prev.tools_tokens + prev.cumulative[-1]

    @property
    def held_counts(self) -> int:
        """Token counts memoised per message digest (bounded by the payload's size)."""
        return len(self._tokens)

    def tools_digest(self, tools: Sequence[Mapping[str, Any]] | None) -> bytes:
        """The tools list's digest, serialised again only when another list (or other tool
        objects) is passed; like a message, a tool edited in place is not re-read."""
        key = self._tools_key
        ids = tuple(map(id, tools or ()))
        if key is not None and key[0] is tools and key[1] == ids:
            return key[2]
        digest = tools_digest(tools)
        self._tools_key = (tools, ids, digest)
        return digest

    def observe(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        injection_points: Iterable[Any] | None = None,
        template_tools: bool = False,
        remember: bool = True,
        end_call: bool = True,
    ) -> PrefixResult:
        """Measure one call's payload against the previous call's, then remember it.

        Args:
            model: the model name, for the counter.
            messages: the messages as sent.
            tools: the tools list as sent.
            injection_points: litellm's ``cache_control_injection_points``, if any.
            template_tools: count the tools as a self-hosted chat template renders them (see
                :func:`~ctxmw.telemetry.counters.template_tools_tokens`), not as OpenAI does.
            remember: False for a side call (a summary): the next call is measured against the
                previous one, not against this.
            end_call: False leaves the call's digest lookups open for a caller that digests
                more of the same call's lists afterwards and then ends the call itself.
        """
        prev = self._previous
        view = self._digests.digests("payload" if remember else "side:payload", messages)
        messages, digests = view.items, view.digests
        tdigest = self.tools_digest(tools)
        common = common_prefix_length(prev.digests, digests) if prev is not None else 0
        tools_changed = prev is not None and prev.tools != tdigest
        if tools_changed:
            common = 0
        cumulative = self._cumulative(model, messages, digests, prev, common)
        layers, last_user = extend_layers(messages, cumulative, prev, common)
        ttokens = self._count_tools(model, tools, tdigest, view.has_system, template_tools)
        snapshot = Snapshot(
            messages,
            digests,
            cumulative,
            layers,
            last_user,
            tdigest,
            ttokens,
            tools_marked(tools),
            frozenset(view.marked_positions() | injected_indices(messages, injection_points)),
            payload_hash(prev, tdigest, digests, common, tools_changed),
        )
        result = self._result(model, prev, snapshot, common, tools_changed)
        if remember:
            self._previous = snapshot
        self._trim_memo(digests)
        if end_call:
            self._digests.end_call("" if remember else "side:")
        return result

    async def count_ahead(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        remember: bool = True,
        chunk: int = _COUNT_CHUNK,
    ) -> None:
        """Count ``messages``' never-counted messages now, giving the loop back between chunks.

        For a payload with many new messages (a first call on a long resumed transcript),
        before :meth:`observe` on the same list in the same call: it then finds every count
        memoised. The counting stays on the event loop (docs/design/performance.md says why), but no
        loop step counts more than ``chunk``.
        """
        slot = "payload" if remember else "side:payload"
        view = await self._digests.digests_chunked(slot, messages, chunk)
        tokens = self._tokens
        missing = [i for i, digest in enumerate(view.digests) if digest not in tokens]
        for start in range(0, len(missing), chunk):
            for i in missing[start : start + chunk]:
                self._count(model, view.items[i], view.digests[i])
            await anyio.lowlevel.checkpoint()

    def export(self) -> dict[str, Any] | None:
        """The previous payload's snapshot as JSON-ready data (None before the first call).

        With :meth:`restore`, another process measures the next call exactly as this one would
        (``ctxmw.state`` carries it between the replicas of a fleet). Token counts memoised for
        other messages are not exported: they are recounted where needed.
        """
        prev = self._previous
        if prev is None:
            return None
        reply = None if self._reply is None else self._reply.hex()
        return {**snapshot_json(prev), "reply": reply}

    def restore(self, data: Mapping[str, Any] | None) -> None:
        """Take ``data`` (from :meth:`export`) as the previous payload."""
        if data is None:
            self._previous, self._reply = None, None
            return
        prev = self._previous = snapshot_from_json(data)
        # Each message's count is the step of the running sums: a message the next payload
        # keeps after a break (a bust) is not counted again, as in the process that exported it.
        counts = prev.cumulative
        self._tokens = {d: counts[i + 1] - counts[i] for i, d in enumerate(prev.digests)}
        reply = data.get("reply")
        self._reply = bytes.fromhex(reply) if isinstance(reply, str) else None

    def _result(
        self, model: str, prev: Snapshot | None, cur: Snapshot, common: int, tools_changed: bool
    ) -> PrefixResult:
        overhead = self._counter.overhead_tokens(model)
        prefix = 0
        if prev is not None and not tools_changed:
            prefix = cur.tools_tokens + cur.cumulative[common]
        broke = prev is not None and (tools_changed or common < len(prev.digests))
        return PrefixResult(
            prompt_tokens=cur.tools_tokens + cur.cumulative[-1] + overhead,
            prefix_tokens=prefix,
            common_messages=common,
            first_diff=None if prev is None else common,
            broke=broke,
            tools_changed=tools_changed,
            marked_prefix_tokens=marked_prefix(prev, cur, common, tools_changed),
            payload_digest=cur.hashed.hexdigest(),
            message_digests=cur.digests,
            layer_tokens=layer_totals(cur),
            cumulative_tokens=cur.cumulative,
            tools_tokens=cur.tools_tokens,
            partial_tokens=self._partial(model, prev, cur, common, broke and not tools_changed),
            reply_tokens=0 if broke else self._reply_tokens(cur, common),
            system_changed=broke and not tools_changed and system_at(prev, cur, common),
            marked=cur.marked,
        )

    def _reply_tokens(self, cur: Snapshot, common: int) -> int:
        if self._reply is None or common >= len(cur.messages):
            return 0
        if _reply_digest(cur.messages[common]) != self._reply:
            return 0
        return cur.cumulative[common + 1] - cur.cumulative[common]

    def _partial(
        self, model: str, prev: Snapshot | None, cur: Snapshot, common: int, measure: bool
    ) -> int:
        if not measure or prev is None or common >= min(len(prev.messages), len(cur.messages)):
            return 0
        before, now = prev.messages[common], cur.messages[common]
        if prev.texts is None:
            shared = shared_text(before, now)
        elif before.get("role") == now.get("role"):  # restored: known by its ladder
            shared = ladder_shared(prev.texts[common], now)
        else:
            shared = ""
        return text_tokens(self._counter, model, shared)

    def _cumulative(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        digests: list[bytes],
        prev: Snapshot | None,
        common: int,
    ) -> array[int]:
        # The common part's sums are the previous call's: only the rest is looked up and added.
        head = prev.cumulative[: common + 1] if prev is not None else array("q", [0])
        counts = [self._count(model, messages[i], digests[i]) for i in range(common, len(digests))]
        tail = accumulate(counts, initial=head[-1])
        next(tail)
        head.extend(tail)
        return head

    def _count(self, model: str, message: Mapping[str, Any], digest: bytes) -> int:
        tokens = self._tokens.get(digest)
        if tokens is None:
            tokens = self._counter.message_tokens(model, message)
            self._tokens[digest] = tokens
        return tokens

    def _trim_memo(self, digests: list[bytes]) -> None:
        # Counts of messages no longer sent go once they outnumber the payload's own (amortised:
        # a call does not pay for a copy of the memo).
        if len(self._tokens) > 2 * len(digests) + _MEMO_SLACK:
            tokens = self._tokens
            self._tokens = {d: tokens[d] for d in set(digests) if d in tokens}

    def _count_tools(
        self,
        model: str,
        tools: Sequence[Mapping[str, Any]] | None,
        digest: bytes,
        has_system: bool,
        template: bool,
    ) -> int:
        if not tools:
            return 0
        key = (model, digest, has_system, template)
        if key not in self._tools_tokens:
            self._tools_tokens[key] = (
                template_tools_tokens(self._counter, model, tools)
                if template
                else self._counter.tools_tokens(model, tools, has_system)
            )
        return self._tools_tokens[key]


def _reply_digest(message: Mapping[str, Any]) -> bytes:
    # A digest, not the reply itself: what a fleet's shared state carries holds no content.
    return hashlib.blake2b(repr(reply_key(message)).encode(), digest_size=16).digest()


def common_prefix_length(previous: Sequence[bytes], current: Sequence[bytes]) -> int:
    """Length of the longest common prefix of two digest lists.

    Compared in C (:func:`~ctxmw.history.compare_prefix`): one list comparison
    in the usual case, where the previous list is a prefix of the current one and unchanged
    messages share their digest objects, else a bisection of slice comparisons.
    """
    return compare_prefix(previous, current)
