"""The ``ctxmw:`` section of the proxy's ``config.yaml``, and the options of one request.

::

    ctxmw:
      state: redis            # memory (default), redis (the proxy's own Redis settings) or a URL
      ledger: /var/log/ctxmw/{replica}.ledger.jsonl   # a file per replica, "redis", or "none"
      replica: os.environ/HOSTNAME                    # names this replica in the ledger
      settings:               # every request: any ctxmw setting (README "Settings")
        prompt_strategies: shorten_tools_epoch_increment,inbox
      models:                 # per model group, over settings
        agent: {epoch_size: 30}
      keys:                   # per key alias, over the model group's
        ci-bot: {prompt_strategies: none}
      request_options: true   # honour metadata.ctxmw in a request (over everything above)

Values may be ``os.environ/NAME`` like the rest of the proxy's file. A key's own metadata
(``/key/generate`` with ``metadata: {"ctxmw": {...}}``) counts like an entry of ``keys``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxmw.errors import SettingsError
from ctxmw.settings import Settings, resolve_settings

__all__ = ["ProxyConfig", "load_config", "proxy_redis_url"]

_SECTION_KEYS = {"state", "ledger", "replica", "settings", "models", "keys", "request_options"}


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
        request_options: honour ``metadata.ctxmw`` in requests.
    """

    state: str = "memory"
    ledger: str = "none"
    replica: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    settings: Mapping[str, Any] = field(default_factory=dict)
    models: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    keys: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    request_options: bool = True

    def options(
        self,
        model_group: str | None,
        key_alias: str | None = None,
        key_metadata: Mapping[str, Any] | None = None,
        request: object = None,
    ) -> dict[str, Any]:
        """The setting overrides of one request, lowest precedence first."""
        merged: dict[str, Any] = dict(self.settings)
        merged.update(self.models.get(model_group or "", {}))
        merged.update(self.keys.get(key_alias or "", {}))
        merged.update(_section(key_metadata, "the key's metadata.ctxmw"))
        if self.request_options and request is not None:
            merged.update(_mapping(request, "the request's metadata.ctxmw"))
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
        request_options=bool(section.get("request_options", True)),
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
    config.resolve(config.settings)
    for name, options in {**config.models, **config.keys}.items():
        try:
            config.resolve({**config.settings, **options})
        except SettingsError as exc:
            raise SettingsError(f"ctxmw options for {name!r}: {exc}") from exc


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


def _section(metadata: Mapping[str, Any] | None, what: str) -> dict[str, Any]:
    if not isinstance(metadata, Mapping) or metadata.get("ctxmw") is None:
        return {}
    return _mapping(metadata["ctxmw"], what)
