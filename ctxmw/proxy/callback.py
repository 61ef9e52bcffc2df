"""``CtxmwProxyHook``: ctxmw inside the LiteLLM Proxy, as a ``CustomLogger`` callback.

A request's path through the hooks (all in the process that accepted it):

1. ``async_pre_call_hook`` (the model group is known): the conversation's identity
   (:mod:`ctxmw.runtime.identity`), its settings (config, model group, key, request;
   :mod:`ctxmw.proxy.config`), and, when ``inbox`` is in the strategy list, its inbox notes,
   claimed atomically in the shared state. An ``abort`` note answers the request with HTTP 400.
2. ``async_pre_call_deployment_hook`` (the deployment is chosen; what it returns is sent): the
   strategies run on the caller's messages, ``inbox`` appending the claimed notes, with the
   conversation's memo as this replica last left it (:mod:`ctxmw.runtime.conversations`, as the
   stateless ``acompletion`` keeps it): their per-call work grows with what is new. For the
   built-in strategies the memo caches what the history determines (the cold-cache clock is off
   in the proxy: no ``now``), so a replica that did not serve the previous request computes the
   same prompt from the history; ``summarize``'s last fold is the one exception (another
   replica summarises anew, as every request did before the memo was kept).
3. ``async_post_call_success_hook`` (before the client gets the answer): the call is recorded
   against the conversation's previous one, the telemetry state and the notes are committed,
   and the record goes to the ledger, the spend-log metadata and Prometheus. For a stream,
   the same happens once the stream has been read to its end.
4. ``async_post_call_failure_hook``: the claimed notes go back to the inbox.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from litellm.integrations.custom_logger import CustomLogger

from ctxmw.errors import CtxmwError, UsageError
from ctxmw.proxy._pending import Pending, PendingRequests
from ctxmw.proxy.config import ProxyConfig, load_config
from ctxmw.proxy.ledger import FileLedger, LedgerSink, RedisLedger
from ctxmw.proxy.metrics import Metrics
from ctxmw.proxy.telemetry import FleetRecorders
from ctxmw.runtime.conversations import Conversations
from ctxmw.runtime.identity import conversation_identity
from ctxmw.settings import Settings
from ctxmw.state import Note, State, open_state
from ctxmw.strategies._chain import NamedStrategy, apply_strategies, resolve_strategies
from ctxmw.types import Messages, StrategyContext

__all__ = ["CtxmwProxyHook"]

logger = logging.getLogger("ctxmw")
_CHAT_CALLS = {"completion", "acompletion"}
_MAX_SETTINGS = 256


class CtxmwProxyHook(CustomLogger):
    """Applies ctxmw's strategies to every chat request through the proxy; see the module doc.

    Args:
        config: the options; default: the ``ctxmw:`` section of the proxy's own config file,
            read on first use.
        state: the shared state; default: the one ``config.state`` names.
    """

    def __init__(self, config: ProxyConfig | None = None, *, state: State | None = None) -> None:
        super().__init__()
        self._config = config
        self._state = state
        self._base: Settings | None = None
        self._recorders: FleetRecorders | None = None
        self._ledger: LedgerSink | None = None
        self._settings: dict[str, Settings] = {}
        self._pending = PendingRequests()
        self._metrics = Metrics()
        # Per conversation, this replica's strategy memo (caches, a summary's last fold), as a
        # stateless ctxmw.acompletion keeps it: bounded, the least recently used forgotten.
        self._memos = Conversations()

    @property
    def config(self) -> ProxyConfig:
        """The options in force (read from the proxy's config file on first use)."""
        if self._config is None:
            self._config = load_config(_proxy_config_path())
        return self._config

    @property
    def state(self) -> State:
        """The shared state."""
        if self._state is None:
            self._state = open_state(self.config.state)
        return self._state

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """Identify the conversation, resolve its settings, claim its notes (see module doc)."""
        messages = data.get("messages")
        if _call_name(call_type) not in _CHAT_CALLS or not isinstance(messages, list):
            return None
        try:
            pending = self._plan(data, user_api_key_dict, messages)
        except UsageError as exc:
            raise _http_error(400, str(exc)) from exc
        call_id = str(data.get("litellm_call_id") or "")
        if any(name == "inbox" for name, _ in pending.strategies):
            pending.notes = await self._claim(pending, call_id)
        self._pending.put(call_id, pending)
        return None

    async def async_pre_call_deployment_hook(
        self, kwargs: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """Run the strategies on the caller's messages; the returned kwargs are sent."""
        pending = self._pending.get(kwargs.get("litellm_call_id"))
        if pending is None:
            return None
        conversation = pending.identity.conversation
        entry = self._memos.check_out(conversation)
        setup = (pending.settings, [name for name, _ in pending.strategies])
        ctx = StrategyContext(
            settings=pending.settings,
            model=str(kwargs.get("model") or ""),
            memo=entry.memo_for(setup),
            cache_control_injection_points=kwargs.get("cache_control_injection_points") or (),
        )
        chain = [
            _fleet_inbox(pending.notes) if n == "inbox" else (n, s) for n, s in pending.strategies
        ]
        pending.trace, pending.stats = [], ctx.stats
        try:
            prompt = await apply_strategies(pending.transcript, chain, ctx, trace=pending.trace)
        finally:
            self._memos.check_in(conversation, entry)
        sent = {**kwargs, "messages": prompt}
        pending.wire = _wire(sent)
        pending.started = time.perf_counter()
        return sent

    async def async_post_call_success_hook(
        self, data: dict[str, Any], user_api_key_dict: Any, response: Any
    ) -> Any:
        """Record the call and commit its state before the client gets the answer."""
        pending = self._pending.pop(data.get("litellm_call_id"))
        if pending is not None and pending.wire:
            await self._commit(pending, data, response, str(data.get("litellm_call_id")))
        return None

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict[str, Any]
    ) -> AsyncGenerator[Any, None]:
        """Pass the stream through; once read to its end, commit like a whole answer."""
        call_id = request_data.get("litellm_call_id")
        chunks = []
        async for chunk in response:
            chunks.append(chunk)
            yield chunk
        pending = self._pending.pop(call_id)
        if pending is not None and pending.wire:
            await self._commit(pending, request_data, chunks, str(call_id))

    async def async_post_call_failure_hook(
        self,
        request_data: dict[str, Any],
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> Any:
        """The request failed: its claimed notes go back to the conversation's inbox."""
        call_id = request_data.get("litellm_call_id")
        pending = self._pending.pop(call_id)
        if pending is not None and pending.notes:
            await self.state.settle(pending.identity.conversation, str(call_id), pending.notes)
        return None

    def _plan(self, data: dict[str, Any], key: Any, messages: Messages) -> Pending:
        metadata = data.get("metadata") if isinstance(data.get("metadata"), Mapping) else {}
        alias = getattr(key, "key_alias", None)
        options = self.config.options(
            str(data.get("model") or ""),
            alias,
            getattr(key, "metadata", None),
            metadata.get("ctxmw") if metadata else None,
        )
        settings = self._settings_for(options)
        return Pending(
            identity=conversation_identity(data),
            settings=settings,
            strategies=resolve_strategies(settings.prompt_strategies, settings),
            transcript=list(messages),
            key_label=str(alias or (getattr(key, "token", None) or "")[:12]),
        )

    def _settings_for(self, options: dict[str, Any]) -> Settings:
        # Building Settings validates every field again (about 40 ms on a loaded 2-core
        # machine): requests with the same options share one, read once from the environment.
        cache_key = json.dumps(options, sort_keys=True, default=repr)
        settings = self._settings.get(cache_key)
        if settings is None:
            if self._base is None:
                self._base = self.config.resolve({})
            settings = self._base.with_overrides(options)
            if len(self._settings) >= _MAX_SETTINGS:
                self._settings.pop(next(iter(self._settings)))
            self._settings[cache_key] = settings
        return settings

    async def _claim(self, pending: Pending, call_id: str) -> list[Note]:
        conversation = pending.identity.conversation
        notes = await self.state.claim_notes(conversation, call_id)
        stop = next((n for n in notes if n.kind == "abort"), None)
        if stop is None:
            return notes
        await self.state.settle(conversation, call_id, [n for n in notes if n is not stop])
        reason = stop.text.strip() or "no reason was given"
        raise _http_error(
            400,
            f"ctxmw: conversation {conversation!r} was aborted through its inbox: {reason}. "
            "Stop the agent, or start a new conversation (a new session id).",
        )

    async def _commit(
        self, pending: Pending, data: dict[str, Any], response: object, call_id: str
    ) -> None:
        conversation = pending.identity.conversation
        try:
            record = await self._telemetry().record(pending, response)
        finally:
            if pending.notes:
                await self.state.settle(conversation, call_id)
        entry = {
            **record.to_dict(),
            "identity": pending.identity.source,
            "replica": self.config.replica,
        }
        metadata = data.setdefault("metadata", {})
        if isinstance(metadata, dict):
            spend = metadata.get("spend_logs_metadata")
            metadata["spend_logs_metadata"] = {**(spend or {}), "ctxmw": entry}
        self._metrics.observe(record, pending.key_label)
        logger.info(
            "ctxmw proxy conversation=%s round=%d replica=%s cache_read=%d expected=%d",
            conversation,
            record.round,
            self.config.replica,
            record.cache_read_tokens,
            record.expected_cached_tokens,
        )
        sink = self._sink()
        if sink is not None:
            await sink.write(entry)

    def _telemetry(self) -> FleetRecorders:
        if self._recorders is None:
            self._recorders = FleetRecorders(self.state)
        return self._recorders

    def _sink(self) -> LedgerSink | None:
        if self._ledger is None:
            path = self.config.ledger_path()
            if path is not None:
                self._ledger = FileLedger(path)
            elif self.config.ledger == "redis":
                self._ledger = RedisLedger(getattr(self.state, "client", None))
        return self._ledger


def _fleet_inbox(notes: list[Note]) -> NamedStrategy:
    """``inbox`` in the proxy: the notes claimed from the shared state, as user messages."""
    shown: Messages = [{"role": "user", "content": n.text} for n in notes if n.text.strip()]

    def inbox(messages: Messages, ctx: StrategyContext) -> Messages:
        if not shown:
            return messages
        ctx.stats["inbox"] = {"delivered": list(shown), "files": []}
        return [*messages, *shown]

    return "inbox", inbox


_WIRE_KEYS = ("model", "messages", "tools", "api_base", "custom_llm_provider")


def _wire(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    wire = {k: kwargs[k] for k in _WIRE_KEYS if kwargs.get(k) is not None}
    if kwargs.get("cache_control_injection_points") is not None:
        wire["cache_control_injection_points"] = kwargs["cache_control_injection_points"]
    return wire


def _call_name(call_type: Any) -> str:
    return str(getattr(call_type, "value", call_type))


def _proxy_config_path() -> str | None:
    server = sys.modules.get("litellm.proxy.proxy_server")
    path = getattr(server, "user_config_file_path", None) if server is not None else None
    return path or os.environ.get("CONFIG_FILE_PATH")


def _http_error(status: int, message: str) -> Exception:
    try:
        from fastapi import HTTPException
    except ImportError:  # pragma: no cover - outside the proxy
        return CtxmwError(message)
    return HTTPException(status_code=status, detail={"error": message})
