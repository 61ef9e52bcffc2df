"""``CtxmwProxyHook``: ctxmw inside the LiteLLM Proxy, as a ``CustomLogger`` callback.

A request's path through the hooks (all in the process that accepted it):

1. ``async_pre_call_hook`` (the model group is known): the conversation's identity, scoped by
   the key's owner (:mod:`ctxmw.proxy.tenancy`), its settings (config, model group, key alias,
   and what the operator lets a tenant set; :mod:`ctxmw.proxy.config`), and, when ``inbox`` is
   in the strategy list, its inbox notes, claimed atomically in the shared state. An ``abort``
   note answers the request with HTTP 400; a shared state that does not answer in time, HTTP
   503 or the caller's messages unchanged (:mod:`ctxmw.proxy._guard`). ctxmw's options are
   removed from every request wherever they came (``metadata``, ``extra_body.metadata``, ...).
   The plan is kept, before any await, under the request's own objects (:mod:`._pending`).
2. ``async_pre_call_deployment_hook`` (the deployment is chosen; what it returns is sent): the
   strategies run on the caller's messages, ``inbox`` appending the claimed notes, with the
   conversation's memo as this replica last left it (:mod:`ctxmw.runtime.conversations`, as the
   stateless ``acompletion`` keeps it): their per-call work grows with what is new. For the
   built-in strategies the memo caches what the history determines (the cold-cache clock is off
   in the proxy: no ``now``), so a replica that did not serve the previous request computes the
   same prompt from the history; ``summarize``'s last fold is the one exception (another
   replica summarises anew). A strategy's own call (a summary) goes to this deployment with
   the request's credentials and metadata (:mod:`ctxmw.proxy._side_call`). LiteLLM's second
   call for a request it translates goes as LiteLLM made it (:mod:`ctxmw.proxy._routes`).
3. ``async_post_call_success_hook`` (before the client gets the answer; for a stream, as it is
   read): the model's ``ctxmw_expand`` calls are answered first (:mod:`._readback_hook`, the
   tool declared in step 2 whenever the chain can show a handle). Then the call is recorded
   against the conversation's previous one, the telemetry state and the notes are committed,
   and the record goes to the ledger, the spend-log metadata and Prometheus. For a stream,
   the same happens once the stream has been read to its end. No recording can turn the answer
   into an error (a failure is logged without content and counted); a read-back's extra call
   that fails answers HTTP 502.
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

from ctxmw.errors import UsageError
from ctxmw.messages._memo import BoundedCache
from ctxmw.messages.form import held_bytes
from ctxmw.proxy import _inbox as inbox
from ctxmw.proxy import _readback_hook as readback
from ctxmw.proxy._guard import StateBudget, after_answer, failed, http_error
from ctxmw.proxy._pending import Pending, PendingRequests
from ctxmw.proxy._request import nested_too_deep
from ctxmw.proxy._routes import ChatTranslation, Translation, route_of, translation_of
from ctxmw.proxy._side_call import DeploymentCall
from ctxmw.proxy.config import ProxyConfig, load_config
from ctxmw.proxy.ledger import FileLedger, LedgerSink, RedisLedger
from ctxmw.proxy.metrics import Metrics
from ctxmw.proxy.telemetry import FleetRecorders, Unsaved
from ctxmw.proxy.tenancy import scoped_identity, tenant_overrides
from ctxmw.runtime.conversations import Conversations
from ctxmw.runtime.options import pop_ctxmw_entries
from ctxmw.settings import Settings
from ctxmw.state import State, open_state
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.telemetry.record import CallRecord, printable
from ctxmw.types import Messages, StrategyContext

__all__ = ["CtxmwProxyHook"]

logger = logging.getLogger("ctxmw")
SETTINGS_BYTES = 4 * 1024 * 1024
"""The settings built for the options requests carry (a tenant's, where the operator allows
them), kept at most: each counted as its options' text twice (the cache's key, the settings'
own copy) and a settings object (about 4 KiB), the least recently used forgotten first."""
_SETTINGS_OBJECT = 4096


class CtxmwProxyHook(CustomLogger):
    """Applies ctxmw's strategies to every chat request through the proxy; see the module doc.

    Args:
        config: the options; default: the ``ctxmw:`` section of the proxy's own config file,
            read on first use.
        state: the shared state; default: the one ``config.state`` names.
        router: what read-back's extra calls go through; default: the proxy's ``llm_router``.
    """

    def __init__(
        self, config: ProxyConfig | None = None, *, state: State | None = None, router: Any = None
    ) -> None:
        super().__init__()
        self._router = router
        self._config = config
        self._state = state
        self._base: Settings | None = None
        self._recorders: FleetRecorders | None = None
        self._ledger: LedgerSink | None = None
        self._settings = BoundedCache(SETTINGS_BYTES)
        self._metrics = Metrics()
        self._held: tuple[PendingRequests, Conversations] | None = None

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
            self._state = open_state(
                self.config.state, memory_bytes=self.config.limits.memory_state_bytes
            )
        return self._state

    @property
    def _pending(self) -> PendingRequests:
        return self._kept()[0]

    @property
    def _memos(self) -> Conversations:
        # Per conversation, this replica's strategy memo (caches, a summary's last fold), as a
        # stateless ctxmw.acompletion keeps it: bounded, the least recently used forgotten.
        return self._kept()[1]

    def _kept(self) -> tuple[PendingRequests, Conversations]:
        """What this replica keeps of requests in flight and between them, bounded in bytes
        by the config's limits (built on first use: the config may be read then)."""
        if self._held is None:
            limits = self.config.limits
            self._held = (
                PendingRequests(max_bytes=limits.pending_bytes),
                Conversations(max_bytes=limits.memo_bytes),
            )
        return self._held

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """Identify the conversation, resolve its settings, claim its notes (see module doc)."""
        name = _call_name(call_type)
        tenant = pop_ctxmw_entries(data)  # from every request, whether ctxmw serves it or not
        request = data.get("litellm_logging_obj")  # this request's own object (see _pending)
        try:
            translation = translation_of(data, name)
            if translation is None or request is None:  # nothing to shorten, or to keep it by
                return None
            pending = self._plan(data, user_api_key_dict, translation.messages, tenant)
        except UsageError as exc:
            raise http_error(400, str(exc)) from exc
        except RecursionError as exc:
            raise http_error(400, nested_too_deep(_conversation_of(data))) from exc
        pending.translation, pending.route = translation, route_of(name) or "chat"
        pending.request = dict(data)  # as the client sent it, before the router adds its keys
        self._pending.put(pending, request, data, data.get("proxy_server_request"))
        if any(strategy == "inbox" for strategy, _ in pending.strategies):
            await inbox.claim(self.state, pending, self.config.on_state_error, self._metrics)
        return None

    async def async_pre_call_deployment_hook(
        self, kwargs: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """Run the strategies on the caller's messages; the returned kwargs are sent. A call
        of another route is LiteLLM's translation of what this returned (see ``_routes``)."""
        pending = self._pending.get(kwargs.get("litellm_logging_obj"))
        if pending is None or not pending.serves(route_of(_call_name(call_type))):
            return None
        try:
            await readback.prepare(self.state, pending, self.config.limits.readback_bytes)
            prompt = await self._prompt(pending, kwargs)
        except RecursionError as exc:
            raise http_error(400, nested_too_deep(pending.transcript)) from exc
        sent = readback.declare_tool(pending, _translation(pending).request(kwargs, prompt), prompt)
        pending.wire = _wire({**kwargs, "messages": prompt})
        pending.started = time.perf_counter()
        return sent

    async def _prompt(self, pending: Pending, kwargs: dict[str, Any]) -> Messages:
        conversation = pending.identity.conversation
        entry = self._memos.check_out(conversation)
        setup = (pending.settings, [name for name, _ in pending.strategies])
        ctx = StrategyContext(
            settings=pending.settings,
            model=str(kwargs.get("model") or ""),
            memo=entry.memo_for(setup),
            completion=DeploymentCall(_translation(pending).side_kwargs(kwargs)),
            cache_control_injection_points=kwargs.get("cache_control_injection_points") or (),
        )
        chain = [
            inbox.fleet_inbox(pending.notes) if n == "inbox" else (n, s)
            for n, s in pending.strategies
        ]
        pending.trace, pending.stats = [], ctx.stats
        try:
            return await apply_strategies(pending.transcript, chain, ctx, trace=pending.trace)
        finally:
            self._memos.check_in(conversation, entry)

    async def async_post_call_success_hook(
        self, data: dict[str, Any], user_api_key_dict: Any, response: Any
    ) -> Any:
        """Record the call and commit its state before the client gets the answer."""
        pending = self._pending.pop(data.get("litellm_logging_obj"))
        final = None
        if pending is not None and pending.readback is not None and pending.readback.declared:
            router = self._llm_router()
            final = await readback.answered(
                self.state, pending, data, response, router, self._metrics
            )
        if pending is not None and pending.wire:
            await self._commit(pending, data, response)
        return final

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict[str, Any]
    ) -> AsyncGenerator[Any, None]:
        """Pass the stream through; once read to its end, commit like a whole answer."""
        chunks, complete = [], False
        pending = self._pending.get(request_data.get("litellm_logging_obj"))
        plan = pending.readback if pending is not None else None
        turn = None
        if pending is not None and plan is not None and plan.declared:
            router, metrics = self._llm_router(), self._metrics
            response, turn = readback.stream(
                self.state, pending, request_data, response, router, metrics
            )
        try:
            async for chunk in response:
                chunks.append(chunk)
                yield chunk
            complete = True
        finally:
            # A stream the client left (the proxy closes this generator) is forgotten now: its
            # notes stay claimed, and the conversation's next request takes them over.
            pending = self._pending.pop(request_data.get("litellm_logging_obj"))
        if complete and pending is not None and plan is not None and turn is not None:
            await readback.keep(self.state, pending, readback.splice_of(turn))
            chunks = plan.first if plan.first is not None else chunks
        if complete and pending is not None and pending.wire:
            await self._commit(pending, request_data, chunks)

    async def async_post_call_failure_hook(
        self,
        request_data: dict[str, Any],
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> Any:
        """The request failed: its claimed notes go back to the conversation's inbox."""
        # No logging object here: the pre-call hook's data, or (/v1/responses) a shallow copy.
        pending = self._pending.pop(request_data, request_data.get("proxy_server_request"))
        if pending is not None and pending.notes:
            await inbox.give_back(self.state, pending, self._metrics)
        return None

    def _plan(
        self, data: dict[str, Any], key: Any, messages: Messages, entries: list[object]
    ) -> Pending:
        model_group = str(data.get("model") or "")
        alias = getattr(key, "key_alias", None)
        operator = self.config.options(model_group, alias)
        base = self._settings_for(operator)
        chain = resolve_strategies(None, base)
        tenant = tenant_overrides(
            self.config.request_options,
            [("the key's metadata.ctxmw", _ctxmw_of(getattr(key, "metadata", None)))]
            + [("the request's metadata.ctxmw", entry) for entry in entries],
            [name for name, _ in chain],
        )
        settings = self._settings_for({**operator, **tenant}) if tenant else base
        return Pending(
            identity=scoped_identity({**data, "messages": messages}, key),
            settings=settings,
            strategies=resolve_strategies(None, settings) if tenant else chain,
            transcript=list(messages),
            key_label=str(alias or (getattr(key, "token", None) or "")[:12]),
            size=held_bytes(messages),
            budget=StateBudget(self.config.state_timeout),
        )

    def _settings_for(self, options: dict[str, Any]) -> Settings:
        # Building Settings validates every field again (about 40 ms on a loaded 2-core
        # machine): requests with the same options share one, read once from the environment.
        cache_key = json.dumps(options, sort_keys=True, default=repr)
        settings: Settings | None = self._settings.get(cache_key)
        if settings is None:
            if self._base is None:
                self._base = self.config.resolve({})
            settings = self._base.with_overrides(options)
            self._settings.put(cache_key, settings, 2 * len(cache_key) + _SETTINGS_OBJECT)
        return settings

    async def _commit(self, pending: Pending, data: dict[str, Any], response: object) -> None:
        """Everything after the answer; no stage may raise (see :mod:`ctxmw.proxy._guard`)."""
        record = None

        async def measure() -> None:
            nonlocal record
            shaped = _translation(pending).telemetry(response)  # a chat response's shape
            try:
                record = await self._telemetry().record(pending, shaped)
            except Unsaved as exc:
                record = exc.record  # published all the same; the failure is still counted
                raise

        # The state's reads and writes spend the request's budget; the measuring is local work.
        await after_answer("telemetry", measure, None, self._metrics)
        if pending.notes:
            await inbox.settle(self.state, pending, self._metrics)
        if record is not None:
            await self._publish(pending, data, record)
        for extra in await readback.records(self._telemetry(), pending, self._metrics):
            await self._publish(pending, {}, extra)

    async def _publish(self, pending: Pending, data: dict[str, Any], record: CallRecord) -> None:
        entry = {
            **record.to_dict(),
            "identity": pending.identity.source,
            "replica": self.config.replica,
        }
        try:
            metadata = data.setdefault("metadata", {})
            if isinstance(metadata, dict):
                spend = metadata.get("spend_logs_metadata")
                metadata["spend_logs_metadata"] = {**(spend or {}), "ctxmw": entry}
            self._metrics.observe(record, pending.key_label)
        except Exception as exc:
            failed("metrics", exc, self._metrics)
        logger.info(
            "ctxmw proxy conversation=%s round=%d replica=%s cache_read=%s expected=%d",
            printable(pending.identity.conversation),
            record.round,
            self.config.replica,
            record.cache_read_tokens,
            record.expected_cached_tokens,
        )
        sink = self._sink()
        if sink is not None:  # Redis spends the request's budget; a file waits its own time
            wait = pending.budget if isinstance(sink, RedisLedger) else self.config.state_timeout
            await after_answer("ledger", lambda: sink.write(entry), wait, self._metrics)

    def _llm_router(self) -> Any:
        server = sys.modules.get("litellm.proxy.proxy_server")
        return self._router or getattr(server, "llm_router", None)

    def _telemetry(self) -> FleetRecorders:
        if self._recorders is None:
            self._recorders = FleetRecorders(self.state, self.config.limits.telemetry_bytes)
        return self._recorders

    def _sink(self) -> LedgerSink | None:
        if self._ledger is None:
            path = self.config.ledger_path()
            if path is not None:
                self._ledger = FileLedger(path)
            elif self.config.ledger == "redis":
                self._ledger = RedisLedger(getattr(self.state, "client", None))
        return self._ledger


def _translation(pending: Pending) -> Translation:
    return pending.translation or ChatTranslation(pending.transcript)


def _conversation_of(data: Mapping[str, Any]) -> list[Any]:
    found = data.get("messages", data.get("input"))
    return found if isinstance(found, list) else []


def _ctxmw_of(metadata: object) -> object:
    return metadata.get("ctxmw") if isinstance(metadata, Mapping) else None


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
