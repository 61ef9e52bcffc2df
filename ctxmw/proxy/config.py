"""The ``ctxmw:`` section of the proxy's ``config.yaml``, and the options of one request.

::

    ctxmw:
      state: redis            # memory (default), redis (the proxy's own Redis settings) or a URL
      ledger: /var/log/ctxmw/{replica}.ledger.jsonl   # a file per replica, "redis", or "none"
      replica: os.environ/HOSTNAME                    # names this replica in the ledger
      settings:               # every request: any ctxmw setting (docs/settings.md)
        prompt_strategies: shorten_tools_epoch_increment,inbox
      models:                 # per model group, over settings
        agent: {epoch_size: 30}
      keys:                   # per key alias, over the model group's
        ci-bot: {prompt_strategies: none}
      request_options: [epoch_size]   # what a tenant may set (default: nothing)
      on_state_error: closed  # Redis down or slow before the upstream call: 503 (or "open")
      state_timeout: 2        # seconds a request waits for the shared state, in all
      limits: {conversation_notes: 100}   # the bounds (ctxmw.proxy._limits)

Values may be ``os.environ/NAME`` like the rest of the proxy's file. What a tenant sends
(``metadata.ctxmw`` in a request, or in its key's own metadata) is honoured only for the
setting names listed in ``request_options``, may only narrow the operator's strategy list (and
never drop ``inbox``), and never names a model (see :mod:`ctxmw.proxy.tenancy`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxmw.errors import SettingsError
from ctxmw.proxy._limits import ProxyLimits, limits_from
from ctxmw.settings import Settings, resolve_settings
from ctxmw.strategies._chain import resolve_strategies

__all__ = ["NEVER_FROM_TENANTS", "ProxyConfig", "load_config", "proxy_redis_url"]

_SECTION_KEYS = {
    "keys",
    "ledger",
    "limits",
    "models",
    "on_state_error",
    "replica",
    "request_options",
    "settings",
    "state",
    "state_timeout",
}
_STATE_POLICIES = ("closed", "open")
NEVER_FROM_TENANTS = {
    "summary_model": "it names a model, which only the proxy's router and the key's model list "
    "may decide",
    "durable_patterns": "its regular expressions would run in the proxy's own process",
}
"""Settings a tenant may never set, whatever ``request_options`` lists, and why."""


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """ctxmw's options in the proxy (see the module docstring).

    Attributes:
        state: ``memory``, or a Redis URL.
        ledger: a file path (``{replica}`` is filled in), ``redis``, or ``none``.
        replica: this replica's name.
        settings: setting overrides for every request.
        models: per model group overrides.
        keys: per key alias overrides.
        request_options: the setting names a tenant may set (``metadata.ctxmw`` of a request or
            of its key); empty: none.
        on_state_error: ``closed`` (a request the shared state cannot serve in time is answered
            with HTTP 503) or ``open`` (it goes upstream with the caller's messages unchanged).
        state_timeout: seconds a request waits for the shared state in all (its waits before
            the upstream call and after the answer share them) before that policy applies.
        limits: the bounds on notes and on what a replica keeps (:mod:`ctxmw.proxy._limits`).
    """

    state: str = "memory"
    ledger: str = "none"
    replica: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    settings: Mapping[str, Any] = field(default_factory=dict)
    models: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    keys: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    request_options: tuple[str, ...] = ()
    on_state_error: str = "closed"
    state_timeout: float = 2.0
    limits: ProxyLimits = field(default_factory=ProxyLimits)

    def options(self, model_group: str | None, key_alias: str | None = None) -> dict[str, Any]:
        """The operator's setting overrides of one request, lowest precedence first."""
        merged: dict[str, Any] = dict(self.settings)
        merged.update(self.models.get(model_group or "", {}))
        merged.update(self.keys.get(key_alias or "", {}))
        return merged

    def resolve(self, options: Mapping[str, Any]) -> Settings:
        """``Settings`` from the environment, then ``options``; invalid values raise."""
        return resolve_settings(None, options)

    def ledger_path(self) -> Path | None:
        """The per-replica ledger file, when the ledger is a file."""
        if self.ledger in ("none", "redis", ""):
            return None
        return Path(self.ledger.replace("{replica}", self.replica))


def load_config(path: str | os.PathLike[str] | None) -> ProxyConfig:
    """Read the ``ctxmw:`` section of a proxy config file (defaults when absent or None).

    Raises:
        SettingsError: the section holds an unknown key or a value of the wrong kind.
    """
    if path is None:
        return ProxyConfig()
    import yaml

    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    return config_from_mapping(raw, source=str(path))


def config_from_mapping(raw: Mapping[str, Any], source: str = "config") -> ProxyConfig:
    """Build the config from a whole proxy config (a mapping with an optional ``ctxmw`` key)."""
    section = _mapping(_env(raw.get("ctxmw") or {}), f"the ctxmw section of {source}")
    unknown = sorted(set(section) - _SECTION_KEYS)
    if unknown:
        raise SettingsError(
            f"The ctxmw section of {source} has unknown key(s) {unknown!r}; allowed: "
            f"{sorted(_SECTION_KEYS)!r}. Move ctxmw settings under 'settings:'."
        )
    state = str(section.get("state", "memory"))
    if state == "redis":
        state = proxy_redis_url(raw)
    config = ProxyConfig(
        state=state,
        ledger=str(section.get("ledger", "none")),
        settings=_mapping(section.get("settings") or {}, "ctxmw.settings"),
        models=_nested(section.get("models") or {}, "ctxmw.models"),
        keys=_nested(section.get("keys") or {}, "ctxmw.keys"),
        request_options=_allowed(section.get("request_options")),
        on_state_error=_choice(section.get("on_state_error", "closed")),
        state_timeout=_seconds(section.get("state_timeout", 2.0)),
        limits=limits_from(section.get("limits") or {}),
        **({"replica": str(section["replica"])} if section.get("replica") else {}),
    )
    _check(config)
    return config


def proxy_redis_url(raw: Mapping[str, Any]) -> str:
    """The Redis the proxy itself uses: ``router_settings``, then ``cache_params``, then env.

    Raises:
        SettingsError: no Redis is configured anywhere.
    """
    router = _env(raw.get("router_settings") or {})
    cache = _env((raw.get("litellm_settings") or {}).get("cache_params") or {})
    for block, prefix in ((router, "redis_"), (cache, "")):
        if block.get(f"{prefix}url"):
            return str(block[f"{prefix}url"])
        if block.get(f"{prefix}host"):
            return _url(
                block[f"{prefix}host"], block.get(f"{prefix}port"), block.get(f"{prefix}password")
            )
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"]
    if os.environ.get("REDIS_HOST"):
        return _url(
            os.environ["REDIS_HOST"], os.environ.get("REDIS_PORT"), os.environ.get("REDIS_PASSWORD")
        )
    raise SettingsError(
        "ctxmw.state is 'redis' but the proxy has no Redis configured: set router_settings."
        "redis_host/redis_port (or litellm_settings.cache_params, or REDIS_HOST/REDIS_URL), or "
        "give ctxmw.state a URL such as 'redis://127.0.0.1:6379/0'."
    )


def _url(host: object, port: object, password: object) -> str:
    auth = f":{password}@" if password else ""
    return f"redis://{auth}{host}:{port or 6379}/0"


def _check(config: ProxyConfig) -> None:
    # Fail at start-up, not on the first request: every layer must build valid settings.
    _no_offload(config.resolve(config.settings), "ctxmw.settings")
    for name, options in {**config.models, **config.keys}.items():
        try:
            settings = config.resolve({**config.settings, **options})
        except SettingsError as exc:
            raise SettingsError(f"ctxmw options for {name!r}: {exc}") from exc
        _no_offload(settings, f"ctxmw options for {name!r}")


def _no_offload(settings: Settings, where: str) -> None:
    # Offload keeps each original in its own store (a replica's memory here), a second copy of
    # tool output the proxy reads back from the request's own messages anyway.
    if any(name == "offload" for name, _ in resolve_strategies(None, settings)):
        raise SettingsError(
            f"{where}: the 'offload' strategy cannot run in the proxy (it would keep every "
            "large tool output in one replica's memory). Remove it: the default strategy's "
            "compacted results are read back in the proxy (ctxmw answers ctxmw_expand from "
            "the request's messages); clients that want offload run ctxmw in their own process."
        )


def _allowed(value: object) -> tuple[str, ...]:
    if value is None or value is False:
        return ()
    names = value if isinstance(value, list | tuple) else None
    if names is None or not all(isinstance(n, str) for n in names):
        raise SettingsError(
            f"ctxmw.request_options must be a list of the setting names a tenant may set, got "
            f"{value!r}; for example [epoch_size, prompt_strategies]. Leave it out to accept none."
        )
    for name in names:
        if name in NEVER_FROM_TENANTS:
            raise SettingsError(
                f"ctxmw.request_options lists {name!r}, which no request may set: "
                f"{NEVER_FROM_TENANTS[name]}. Remove it from the list."
            )
        if name not in Settings.model_fields:
            raise SettingsError(
                f"ctxmw.request_options lists {name!r}, which is not a ctxmw setting; the "
                f"settings are {sorted(Settings.model_fields)!r}."
            )
    return tuple(names)


def _choice(value: object) -> str:
    if value not in _STATE_POLICIES:
        raise SettingsError(
            f"ctxmw.on_state_error must be one of {_STATE_POLICIES!r}, got {value!r}: 'closed' "
            "answers HTTP 503 when the shared state is unreachable, 'open' sends the caller's "
            "messages unchanged."
        )
    return str(value)


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 60:
        raise SettingsError(
            f"ctxmw.state_timeout must be a number of seconds above 0 and at most 60, got "
            f"{value!r}; for example 2."
        )
    return float(value)


def _env(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("os.environ/"):
        return os.environ.get(value.removeprefix("os.environ/"))
    if isinstance(value, Mapping):
        return {k: _env(v) for k, v in value.items()}
    return value


def _mapping(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise SettingsError(
            f"{what} must be a mapping of ctxmw setting names to values, got {value!r}; "
            "for example {'prompt_strategies': 'shorten_tools_epoch_increment,inbox'}."
        )
    return {str(k): v for k, v in value.items()}


def _nested(value: object, what: str) -> dict[str, Mapping[str, Any]]:
    return {
        name: _mapping(inner, f"{what}.{name}") for name, inner in _mapping(value, what).items()
    }
