"""The stats page in a real headless Chromium: it loads without a console error, draws every
session, and asks for nothing over the network.

Debian's ``chromium`` (``/usr/bin/chromium``, installed by ``.ci/run``) driven by Playwright's
Python package through its executable path; Playwright never downloads a browser here. Without
either the test is skipped with the reason; ``--browser-require`` (``.ci/run``) fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from ctxmw.cli import main

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CTXMW_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser(request: pytest.FixtureRequest) -> Any:
    missing = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "Playwright is not installed (pip install -e '.[browser]')"
    if missing is None and shutil.which(CHROMIUM) is None:
        missing = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if missing is not None:
        if request.config.getoption("--browser-require"):
            pytest.fail(f"BROWSER TEST REQUIRED BUT {missing}", pytrace=False)
        pytest.skip(f"browser test skipped: {missing}")
    with sync_playwright() as p:
        # Playwright gives the browser a new empty profile of its own.
        launched = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield launched
        finally:
            launched.close()


def rec(session: str, n: int, read: int | None, **extra: Any) -> dict[str, Any]:
    return {
        "session": session, "model": "gpt-4o", "round": n, "prompt_tokens": 1500 + 400 * n,
        "prompt_tokens_local": 1450 + 390 * n, "cache_read_tokens": read,
        "expected_cached_tokens": 0 if n == 0 else 1400 + 380 * n, "cache_write_tokens": None,
        "cost_usd": 0.002 + 0.0001 * n, "epoch": n // 5, "bust": None, **extra,
    }  # fmt: skip


def ledger(tmp_path: Path) -> Path:
    tools = {"cause": "tools", "strategy": None, "message_index": None}
    epoch = {"cause": "strategy", "strategy": "shorten_tools_epoch", "message_index": 7}
    records = [rec("agent-1", n, 0 if n == 0 else 1408 + 384 * n) for n in range(12)]
    records[5]["bust"], records[9]["bust"] = epoch, tools
    records += [rec("agent-2 <b>", n, None, cost_usd=None) for n in range(4)]  # never reported
    records += [rec("agent-3", 0, 0)]  # one call
    path = tmp_path / "agents.ledger.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_the_page_loads_cleanly_and_draws_every_session(browser: Any, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main(["stats", str(ledger(tmp_path)), "--html", str(out)]) == 0
    page = browser.new_page()
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda e: problems.append(str(e)))
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(out.as_uri())
    page.wait_for_selector("body[data-drawn]")
    assert problems == []
    assert requests == [out.as_uri()]  # the page itself, nothing else
    sections = page.query_selector_all("section.session")
    assert [s.get_attribute("data-session") for s in sections] == [
        "agent-1", "agent-2 <b>", "agent-3"
    ]  # fmt: skip
    assert [s.get_attribute("data-calls") for s in sections] == ["12", "4", "1"]
    for section in sections:
        assert len(section.query_selector_all("svg")) == 3
        assert section.query_selector_all("path.series")  # the prompt line at least
    first, never, single = sections
    assert len(first.query_selector_all("svg:first-of-type line.bust")) == 2
    assert first.query_selector_all("line.epoch")
    assert "bust_tools" in first.inner_text()
    # not reported is no line at all, never one along 0; unpriced calls draw no bar
    drawn = {p.get_attribute("class") for p in never.query_selector_all("path.series")}
    assert drawn == {"series prompt", "series expected-fraction"}
    assert len(first.query_selector_all("path.read")) == 1
    assert len(first.query_selector_all("path.read-fraction")) == 1
    assert never.query_selector_all("rect.bar") == []
    assert "hit rate not reported" in never.inner_text()
    assert "cache reads (provider): not reported" in never.inner_text()
    assert single.query_selector_all("circle.point.prompt")  # one call is a point, not nothing
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
