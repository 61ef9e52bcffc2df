"""ctxmw as a LiteLLM Proxy callback: every agent behind the proxy gets the strategies.

In the proxy's ``config.yaml``::

    litellm_settings:
      callbacks: ["ctxmw.proxy.hook"]

``ctxmw.proxy.hook`` is built when the proxy asks for it (nothing happens at import): one
:class:`CtxmwProxyHook` per process, reading the ``ctxmw:`` section of the proxy's config file
(:mod:`ctxmw.proxy.config`), with the inbox routes (:mod:`ctxmw.proxy.route`) added to the
proxy's app. Needs the proxy's own packages: ``pip install -e '.[proxy]'`` in a ctxmw checkout.
"""

from __future__ import annotations

import sys
from typing import Any

from ctxmw.proxy.callback import CtxmwProxyHook
from ctxmw.proxy.config import ProxyConfig, config_from_mapping, load_config
from ctxmw.runtime.identity import Identity, conversation_identity

__all__ = [
    "CtxmwProxyHook",
    "Identity",
    "ProxyConfig",
    "config_from_mapping",
    "conversation_identity",
    "load_config",
    "proxy_hook",
]

_hook: CtxmwProxyHook | None = None


def proxy_hook() -> CtxmwProxyHook:
    """This process's hook, built on first use, with its routes on the running proxy's app."""
    global _hook
    if _hook is None:
        _hook = CtxmwProxyHook()
        server = sys.modules.get("litellm.proxy.proxy_server")
        app = getattr(server, "app", None)
        if app is not None:
            from ctxmw.proxy.route import install_routes

            _hook.config  # noqa: B018 - a bad ctxmw section stops the proxy's start-up, not a request
            install_routes(app, _hook)
    return _hook


def __getattr__(name: str) -> Any:
    if name == "hook":
        return proxy_hook()
    raise AttributeError(f"module 'ctxmw.proxy' has no attribute {name!r}")
