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

from ctxmw.errors import SettingsError
from ctxmw.state._base import DEFAULT_TTL_S, Note, State, key, sort_notes
from ctxmw.state.memory import MemoryState

__all__ = ["RedisState", "open_state"]

_PUSH = """
local seq = redis.call('INCR', KEYS[2])
local note = cjson.encode({seq = seq, kind = ARGV[1], text = ARGV[2]})
redis.call('RPUSH', KEYS[1], note)
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return note
"""

# KEYS: notes, claims; ARGV: claim key prefix, this claim's id, ttl.
_CLAIM = """
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local ck = ARGV[1] .. id
  for _, n in ipairs(redis.call('LRANGE', ck, 0, -1)) do table.insert(out, n) end
  redis.call('DEL', ck)
end
redis.call('DEL', KEYS[2])
for _, n in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do table.insert(out, n) end
redis.call('DEL', KEYS[1])
if #out > 0 then
  local ck = ARGV[1] .. ARGV[2]
  redis.call('RPUSH', ck, unpack(out))
  redis.call('SADD', KEYS[2], ARGV[2])
  redis.call('EXPIRE', ck, ARGV[3])
  redis.call('EXPIRE', KEYS[2], ARGV[3])
end
return out
"""

# KEYS: notes, claims, this claim; ARGV: claim id, ttl, then the notes to requeue.
_SETTLE = """
redis.call('DEL', KEYS[3])
redis.call('SREM', KEYS[2], ARGV[1])
if #ARGV > 2 then
  redis.call('RPUSH', KEYS[1], unpack(ARGV, 3))
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return 1
"""

_PENDING = """
local out = redis.call('LRANGE', KEYS[1], 0, -1)
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  for _, n in ipairs(redis.call('LRANGE', ARGV[1] .. id, 0, -1)) do table.insert(out, n) end
end
return out
"""


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

    async def push_note(self, conversation: str, kind: str, text: str) -> Note:
        """Queue a note (one script: a sequence number, then the list)."""
        keys = [key(conversation, "notes"), key(conversation, "seq")]
        raw = await self._push(keys=keys, args=[kind, text, self._ttl])
        return Note.from_json(raw)

    async def claim_notes(self, conversation: str, claim: str) -> list[Note]:
        """Take the pending and unsettled notes under ``claim`` (one script)."""
        keys = [key(conversation, "notes"), key(conversation, "claims")]
        raw = await self._claim(keys=keys, args=[key(conversation, "claim:"), claim, self._ttl])
        return sort_notes(raw)

    async def settle(self, conversation: str, claim: str, requeue: Sequence[Note] = ()) -> None:
        """End ``claim``; ``requeue`` goes back to the pending notes (one script)."""
        keys = [
            key(conversation, "notes"),
            key(conversation, "claims"),
            key(conversation, f"claim:{claim}"),
        ]
        await self._settle(keys=keys, args=[claim, self._ttl, *(n.to_json() for n in requeue)])

    async def pending_notes(self, conversation: str) -> list[Note]:
        """Notes not yet delivered, in push order."""
        keys = [key(conversation, "notes"), key(conversation, "claims")]
        return sort_notes(await self._pending(keys=keys, args=[key(conversation, "claim:")]))

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._redis.aclose()


def open_state(url: str | None) -> State:
    """The state a URL names: None or ``"memory"`` -> :class:`MemoryState`, else Redis.

    Raises:
        SettingsError: the URL is neither ``memory`` nor a Redis URL.
    """
    if url is None or url == "memory":
        return MemoryState()
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
