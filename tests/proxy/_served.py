"""LiteLLM Proxy replicas serving the three routes from one loopback provider of all three APIs.

:func:`served_routes` starts the replicas (each model group of ``deployments`` a deployment on
the :class:`~tests.proxy._route_upstream.RouteUpstream`; ``claude`` and ``gpt`` always there),
optionally on a Redis shared state, and stops everything after.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests._proxy_routes import ANTHROPIC, RESPONSES
from tests.proxy._harness import MASTER_KEY, Replica
from tests.proxy._route_upstream import RouteUpstream

__all__ = ["Served", "served_routes"]


class Served:
    """The upstream, the replicas (requests go to them in turn) and the shared ledger file."""

    def __init__(self, upstream: RouteUpstream, replicas: list[Replica], ledger: Path) -> None:
        self.upstream, self.replicas, self.ledger_path = upstream, replicas, ledger
        self.replica = replicas[0]
        self._sent = 0

    def post(
        self, path: str, body: dict[str, Any], session: str, key: str = MASTER_KEY
    ) -> httpx.Response:
        """One request, to the next replica in turn."""
        replica = self.replicas[self._sent % len(self.replicas)]
        self._sent += 1
        headers = {"Authorization": f"Bearer {key}", "x-litellm-session-id": session}
        return httpx.post(f"{replica.url}{path}", json=body, headers=headers, timeout=120)

    def ledger(self, session: str) -> list[dict[str, Any]]:
        """The ledger lines of ``session``, in the order written (every replica's)."""
        paths = sorted(self.ledger_path.parent.glob(self.ledger_path.name.replace("{r}", "*")))
        lines = [line for p in paths for line in p.read_text(encoding="utf-8").splitlines()]
        records = [r for r in map(json.loads, lines) if r["session"].endswith(f"/{session}")]
        return sorted(records, key=lambda r: str(r["ts"]))


@contextmanager
def served_routes(
    folder: Path,
    deployments: Mapping[str, str],
    ctxmw: dict[str, Any],
    *,
    upstream: RouteUpstream | None = None,
    replicas: int = 1,
    redis_port: int | None = None,
) -> Iterator[Served]:
    """Serve the routes (see the module docstring); ``ctxmw``: the config's ctxmw section,
    without ``ledger`` and ``replica`` (one ledger file per replica, in ``folder``)."""
    upstream = upstream or RouteUpstream()
    names = [f"replica{i}" for i in range(replicas)] if replicas > 1 else ["replica"]
    ledger = folder / ("{r}.ledger.jsonl" if replicas > 1 else "replica.ledger.jsonl")
    section = {**ctxmw, "ledger": str(folder / "{replica}.ledger.jsonl")}
    section["replica"] = "os.environ/CTXMW_TEST_REPLICA"
    config: dict[str, Any] = {
        "model_list": [
            _deployment("claude", ANTHROPIC[1], upstream.base),
            _deployment("gpt", RESPONSES[1], f"{upstream.base}/v1"),
            *(_deployment(n, m, _api_base(upstream, m)) for n, m in deployments.items()),
        ],
        "general_settings": {"master_key": MASTER_KEY},
        "litellm_settings": {"callbacks": ["ctxmw.proxy.hook"]},
        "ctxmw": section,
    }
    if redis_port is not None:
        section["state"] = "redis"
        config["router_settings"] = {"redis_host": "127.0.0.1", "redis_port": redis_port}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    running = [Replica(path, name, folder / f"{name}.log") for name in names]
    try:
        for replica in running:
            replica.start()
        for replica in running:
            replica.wait()
        yield Served(upstream, running, ledger)
    finally:
        for replica in running:
            replica.stop()
        upstream.stop()


def _api_base(upstream: RouteUpstream, model: str) -> str:  # Anthropic's client adds /v1 itself
    return upstream.base if model.startswith("anthropic/") else f"{upstream.base}/v1"


def _deployment(name: str, model: str, api_base: str) -> dict[str, Any]:
    params = {"model": model, "api_base": api_base, "api_key": "upstream-needs-no-key"}
    return {"model_name": name, "litellm_params": params}
