"""The live tier's server check: loud when the server is missing, never a silent pass.

With ``--live`` and no server answering at ``--live-api-base``, each live test is skipped with a
reason in capitals and the run ends with a banner saying the tier did not run; with
``--live-require-server`` (what ``.ci/run`` passes once it has started the server) they fail.
"""

from __future__ import annotations

import httpx
import pytest

_UNREACHABLE = pytest.StashKey[str]()


@pytest.fixture(scope="session")
def live_api_base(request: pytest.FixtureRequest) -> str:
    """The base URL of a server that answers ``GET /models``; skips (or fails) loudly if none."""
    config = request.config
    base = str(config.getoption("--live-api-base")).rstrip("/")
    problem = _probe(base)
    if problem is None:
        return base
    required = bool(config.getoption("--live-require-server"))
    message = (
        f"LIVE TIER {'FAILED' if required else 'SKIPPED'}: NO SERVER ANSWERS AT {base} "
        f"({problem}). Start a llama.cpp server of your own and pass --live-api-base, or one "
        "with the project's CI tools beside the clone: bash ../shared/tools/local-llm.sh start"
    )
    config.stash[_UNREACHABLE] = message
    if required:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _probe(base: str) -> str | None:
    try:
        response = httpx.get(f"{base}/models", timeout=5.0)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if response.status_code != 200:
        return f"GET /models answered {response.status_code}"
    return None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    message = terminalreporter.config.stash.get(_UNREACHABLE, None)
    if message is not None:
        terminalreporter.write_sep("!", message, red=True, bold=True)
