"""``RedisState``: the fleet backend, on the Redis (or Valkey) server every replica shares.

Values are plain keys with a time to live. Notes live in three kinds of keys per conversation,
all under one hash tag (``ctxmw:{<conversation>}:...``): ``notes`` (a list of pending notes),
``claims`` (a set of claim ids) and ``claim:<id>`` (a list per claim), plus a ``seq`` counter.
Each note operation is one Lua script, so it is atomic on the server whatever the number of
replicas: two replicas never both take one note.

Needs the ``redis`` package (``pip install redis``; ``pip install -e '.[proxy]'`` in a ctxmw
checkout installs it with the proxy's packages).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxmw.errors import NotesFull, SettingsError
from ctxmw.state._base import DEFAULT_TTL_S, Note, NoteBounds, State, key, sort_notes
from ctxmw.state.memory import MemoryState

__all__ = ["RedisState", "open_state"]

# Shared by the scripts: a list pushed in chunks (Lua's unpack takes ~8,000 values at most),
# and the notes waiting in a conversation (pending, then each claim's), read before any write.
_LIB = """
local function push(key, items)
  for i = 1, #items, 1000 do
    redis.call('RPUSH', key, unpack(items, i, math.min(i + 999, #items)))
  end
end
local function waiting(notes, claims, prefix)
  local out = redis.call('LRANGE', notes, 0, -1)
  for _, id in ipairs(redis.call('SMEMBERS', claims)) do
    for _, n in ipairs(redis.call('LRANGE', prefix .. id, 0, -1)) do out[#out + 1] = n end
  end
  return out
end
local function text_bytes(raw)
  return string.len(cjson.decode(raw).text)
end
"""

# KEYS: notes, seq, claims, scope name; ARGV: kind, text, ttl, claim key prefix, then the
# bounds (conversation notes, bytes, scope name: all empty for none).
_PUSH = (
    _LIB
    + """
local size = string.len(ARGV[2])
if ARGV[5] ~= '' then
  local notes = waiting(KEYS[1], KEYS[3], ARGV[4])
  if #notes + 1 > tonumber(ARGV[5]) then return {'conversation_notes', #notes} end
  local held = 0
  for _, n in ipairs(notes) do held = held + text_bytes(n) end
  if held + size > tonumber(ARGV[6]) then return {'conversation_note_bytes', held} end
end
local seq = redis.call('INCR', KEYS[2])
local note = cjson.encode({seq = seq, kind = ARGV[1], text = ARGV[2]})
redis.call('RPUSH', KEYS[1], note)
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
if ARGV[7] ~= '' then redis.call('SET', KEYS[4], ARGV[7], 'EX', ARGV[3]) end
return note
"""
)

# KEYS: the scope's byte count; ARGV: bytes to add (negative: to release), bound, ttl.
_SCOPE = """
local held = tonumber(redis.call('GET', KEYS[1]) or '0')
local size = tonumber(ARGV[1])
if size > 0 and held + size > tonumber(ARGV[2]) then return held end
if held + size <= 0 then redis.call('DEL', KEYS[1]) return -1 end
redis.call('INCRBY', KEYS[1], size)
if size > 0 then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return -1
"""

# KEYS: notes, claims; ARGV: claim key prefix, this claim's id, ttl, limit (0: none).
_CLAIM = (
    _LIB
    + """
local all = waiting(KEYS[1], KEYS[2], ARGV[1])
local limit = tonumber(ARGV[4])
local taken, left = all, {}
if limit > 0 and #all > limit then
  local entries = {}
  for i, n in ipairs(all) do
    local d = cjson.decode(n)
    entries[i] = {d.seq, d.kind, n}
  end
  table.sort(entries, function(a, b) return a[1] < b[1] end)
  taken = {}
  for i, e in ipairs(entries) do
    if i <= limit or e[2] == 'abort' then taken[#taken + 1] = e[3] else left[#left + 1] = e[3] end
  end
end
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do redis.call('DEL', ARGV[1] .. id) end
redis.call('DEL', KEYS[2], KEYS[1])
if #left > 0 then
  push(KEYS[1], left)
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
if #taken > 0 then
  local ck = ARGV[1] .. ARGV[2]
  push(ck, taken)
  redis.call('SADD', KEYS[2], ARGV[2])
  redis.call('EXPIRE', ck, ARGV[3])
  redis.call('EXPIRE', KEYS[2], ARGV[3])
end
return taken
"""
)

# KEYS: notes, claims, this claim, scope name; ARGV: claim id, ttl, then the notes to requeue.
# Returns the bytes delivered and the conversation's scope.
_SETTLE = (
    _LIB
    + """
local delivered = 0
for _, n in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  delivered = delivered + text_bytes(n)
end
local requeue = {}
for i = 3, #ARGV do
  requeue[#requeue + 1] = ARGV[i]
  delivered = delivered - text_bytes(ARGV[i])
end
redis.call('DEL', KEYS[3])
redis.call('SREM', KEYS[2], ARGV[1])
if #requeue > 0 then
  push(KEYS[1], requeue)
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return {math.max(delivered, 0), redis.call('GET', KEYS[4]) or ''}
"""
)

_PENDING = (
    _LIB
    + """
return waiting(KEYS[1], KEYS[2], ARGV[1])
"""
)


class RedisState:
    """State on a Redis server (see :mod:`ctxmw.state` for the contract).

    Args:
        url: a ``redis://`` (or ``rediss://``, ``unix://``) URL.
        client: an already built ``redis.asyncio.Redis`` (then ``url`` is ignored).
        ttl_s: time to live of a conversation's notes after their last change.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        client: Any = None,
        ttl_s: int = DEFAULT_TTL_S,
    ) -> None:
        if client is None:
            client = _client(url)
        self._redis = client
        self._ttl = ttl_s
        self._push = client.register_script(_PUSH)
        self._scope = client.register_script(_SCOPE)
        self._claim = client.register_script(_CLAIM)
        self._settle = client.register_script(_SETTLE)
        self._pending = client.register_script(_PENDING)

    @property
    def client(self) -> Any:
        """The ``redis.asyncio.Redis`` client (the ``redis`` ledger shares it)."""
        return self._redis

    async def get(self, key: str) -> str | None:
        """The value under ``key``, or None."""
        value = await self._redis.get(key)
        return None if value is None else _text(value)

    async def set(self, key: str, value: str, ttl_s: int = DEFAULT_TTL_S) -> None:
        """Store ``value`` for ``ttl_s`` seconds."""
        await self._redis.set(key, value, ex=max(int(ttl_s), 1))

    async def delete(self, key: str) -> None:
        """Forget ``key``."""
        await self._redis.delete(key)

    async def push_note(
        self, conversation: str, kind: str, text: str, bounds: NoteBounds | None = None
    ) -> Note:
        """Queue a note (one script: the conversation's bounds, a sequence number, the list).

        A scope's bytes are counted first (one script on the scope's own key: another Redis
        Cluster slot) and given back when the conversation refuses the note.
        """
        size, scope = len(text.encode()), bounds.scope if bounds is not None else None
        if bounds is not None and scope is not None:
            await self._count(conversation, scope, size, bounds.scope_note_bytes)
        keys = [key(conversation, part) for part in ("notes", "seq", "claims", "scope")]
        args: list[Any] = [kind, text, self._ttl, key(conversation, "claim:"), "", "", ""]
        if bounds is not None:
            args[4:] = [bounds.conversation_notes, bounds.conversation_note_bytes, scope or ""]
        raw = await self._push(keys=keys, args=args)
        if isinstance(raw, list):  # refused: [the limit, what waits]
            if scope is not None:
                await self._count(conversation, scope, -size, 0)
            limit = _text(raw[0])
            raise NotesFull(
                conversation, limit, int(args[5 if "bytes" in limit else 4]), int(raw[1])
            )
        return Note.from_json(raw)

    async def _count(self, conversation: str, scope: str, size: int, bound: int) -> None:
        """Add ``size`` bytes to the scope's count, refused past ``bound``; or release them."""
        held = int(await self._scope(keys=[_scope_key(scope)], args=[size, bound, self._ttl]))
        if held >= 0:
            raise NotesFull(conversation, "scope_note_bytes", bound, held)

    async def claim_notes(
        self, conversation: str, claim: str, limit: int | None = None
    ) -> list[Note]:
        """Take the pending and unsettled notes under ``claim`` (one script): the ``limit``
        oldest and every abort; the rest stay pending."""
        keys = [key(conversation, "notes"), key(conversation, "claims")]
        args = [key(conversation, "claim:"), claim, self._ttl, limit or 0]
        return sort_notes(await self._claim(keys=keys, args=args))

    async def settle(self, conversation: str, claim: str, requeue: Sequence[Note] = ()) -> None:
        """End ``claim``; ``requeue`` goes back to the pending notes (one script), and the
        bytes delivered leave the scope's count."""
        keys = [
            key(conversation, "notes"),
            key(conversation, "claims"),
            key(conversation, f"claim:{claim}"),
            key(conversation, "scope"),
        ]
        args = [claim, self._ttl, *(n.to_json() for n in requeue)]
        delivered, scope = await self._settle(keys=keys, args=args)
        if int(delivered) > 0 and _text(scope):
            await self._count(conversation, _text(scope), -int(delivered), 0)

    async def pending_notes(self, conversation: str) -> list[Note]:
        """Notes not yet delivered, in push order."""
        keys = [key(conversation, "notes"), key(conversation, "claims")]
        return sort_notes(await self._pending(keys=keys, args=[key(conversation, "claim:")]))

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._redis.aclose()


def _scope_key(scope: str) -> str:
    return f"ctxmw:{{scope:{scope}}}:note_bytes"


def open_state(url: str | None, *, memory_bytes: int = 64 * 1024 * 1024) -> State:
    """The state a URL names: None or ``"memory"`` -> :class:`MemoryState` (holding at most
    ``memory_bytes`` of values), else Redis.

    Raises:
        SettingsError: the URL is neither ``memory`` nor a Redis URL.
    """
    if url is None or url == "memory":
        return MemoryState(max_bytes=memory_bytes)
    if not url.startswith(("redis://", "rediss://", "unix://", "valkey://")):
        raise SettingsError(
            f"state={url!r} is not a state URL; use 'memory' (one process) or a Redis URL such "
            "as 'redis://127.0.0.1:6379/0' (a fleet of replicas)."
        )
    return RedisState(url.replace("valkey://", "redis://", 1))


def _client(url: str) -> Any:
    try:
        from redis import asyncio as aioredis
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise SettingsError(
            f"The Redis state ({url!r}) needs the 'redis' package; install it with "
            "pip install redis (in a ctxmw checkout: pip install -e '.[proxy]'), or use the "
            "in-memory state."
        ) from exc
    # Bounded: a Redis that hangs must not hold a request (or a replica's task) forever.
    return aioredis.Redis.from_url(
        url, decode_responses=True, socket_connect_timeout=2, socket_timeout=5
    )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
