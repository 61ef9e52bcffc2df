"""The stats page in a real headless Chromium: it loads without a console error, draws every
session, and asks for nothing over the network.

Debian's ``chromium`` (``/usr/bin/chromium``, installed by ``.ci/run``) driven by Playwright's
Python package through its executable path; Playwright never downloads a browser here. Without
either the test is skipped with the reason; ``--browser-require`` (``.ci/run``) fails instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from ctxmw.cli import main
from tests.conftest import DemoRun

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # Chromium, and the demo: the slow tier

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


def open_page(browser: Any, path: Path) -> tuple[Any, list[str], list[str]]:
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda e: problems.append(str(e)))
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-drawn]")
    return page, problems, requests


def test_the_page_loads_cleanly_and_draws_every_session(browser: Any, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main(["stats", str(ledger(tmp_path)), "--html", str(out)]) == 0
    page, problems, requests = open_page(browser, out)
    assert problems == []
    assert requests == [out.as_uri()]  # the page itself, nothing else
    sections = page.query_selector_all("section.session")
    assert [s.get_attribute("data-session") for s in sections] == [
        "agent-3",
        "agent-1",
        "agent-2 <b>",
    ]  # fmt: skip  (by cost: $0.002, $0.031, unpriced last)
    assert [s.get_attribute("data-calls") for s in sections] == ["1", "12", "4"]
    for section in sections:
        assert len(section.query_selector_all("svg")) == 2  # tokens, cached fraction
        assert section.query_selector_all("path.series")  # the prompt line at least
    single, first, never = sections
    assert len(first.query_selector_all("rect.bust")) == 2  # calls 6 and 10: two runs
    assert first.query_selector_all("line.epoch")
    assert "bust_tools" in first.inner_text()
    # not reported is no line at all, never one along 0
    drawn = {p.get_attribute("class") for p in never.query_selector_all("path.series")}
    assert drawn == {"series prompt", "series expected-fraction"}
    assert len(first.query_selector_all("path.read")) == 1
    assert len(first.query_selector_all("path.read-fraction")) == 1
    assert "hit rate not reported" in never.inner_text()
    assert "cache reads (provider): not reported" in never.inner_text()
    assert single.query_selector_all("circle.point.prompt")  # one call is a point, not nothing
    ends = [t.text_content() for t in page.query_selector_all("#overview text.end-label")]
    assert "agent-2 <b> not priced" in ends  # an unpriced session's end is never $0.00
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)


def test_a_session_name_cannot_break_the_page(browser: Any, tmp_path: Path) -> None:
    """Any proxy client can name its session: a name that opens an HTML comment and a script
    (which would swallow the real closing tag) or closes the data block, draws as text."""
    names = ["<!--<script>", "</script><script>alert(1)</script>", "{{TITLE}} & {{DATA}}"]
    records = [rec(name, n, 1408 + 384 * n) for name in names for n in range(3)]
    path = tmp_path / "evil.ledger.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "report.html"
    assert main(["stats", str(path), "--html", str(out)]) == 0
    page, problems, _ = open_page(browser, out)
    assert problems == []
    sessions = page.query_selector_all("section.session")
    assert [s.get_attribute("data-session") for s in sessions] == names
    cells = page.query_selector_all("#comparison tbody td[data-field=session]")
    assert [c.inner_text() for c in cells] == names


def test_the_demos_page_compares_its_six_sessions(
    browser: Any, demo_run: DemoRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page the demo writes: its table says what ``ctxmw stats --json`` says, no two bust
    labels overlap, and the scale switches from shared to per session."""
    assert main(["stats", "--json", *demo_run.ledgers]) == 0
    by_session = {r["session"]: r for r in json.loads(capsys.readouterr().out)["sessions"]}
    page, problems, _ = open_page(browser, demo_run.out / "report.html")
    assert problems == []
    table = page.query_selector_all("#comparison tbody tr")
    rows = [by_session[tr.get_attribute("data-session")] for tr in table]
    assert len(table) == len(rows) == 6
    for tr, row in zip(table, rows, strict=True):
        cells = {td.get_attribute("data-field"): td for td in tr.query_selector_all("td")}
        for field in ("session", "model", "calls", "prompt_tokens", "cache_read_tokens"):
            assert json.loads(cells[field].get_attribute("data-value")) == row[field]
        for field in ("expected_cached_tokens", "hit_rate", "cost_usd"):
            assert json.loads(cells[field].get_attribute("data-value")) == row[field]
        assert cells["prompt_tokens"].inner_text() == f"{row['prompt_tokens']:,}"
        assert cells["hit_rate"].inner_text() == f"{row['hit_rate']:.1%}"
        assert cells["cost_usd"].inner_text() == f"${row['cost_usd']:,.2f}"  # to the cent
        assert json.loads(cells["bust_calls"].get_attribute("data-value")) == sum(
            row["busts"].values()
        )
    for svg in page.query_selector_all("section.session svg"):
        boxes = [t.bounding_box() for t in svg.query_selector_all("text.bust-label")]
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                apart = a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
                assert apart or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"]
    ticks = [t.text_content() for t in page.query_selector_all("section.session svg text.tick")]
    assert all(re.fullmatch(r"\d+(\.\d+)?[kM]?|\d+%", t) for t in ticks), ticks
    assert "100k" in ticks  # a shared scale: every session's chart reaches the biggest prompt
    page.screenshot(path=str(tmp_path / "demo-report.png"), full_page=True)
    page.check("input[name=scale][value=own]")
    assert page.get_attribute("body", "data-scale") == "own"
    assert len(page.query_selector_all("section.session")) == 6


def test_the_demos_page_shows_what_each_row_hid_beside_its_cost_and_keeps_lines_apart(
    browser: Any, demo_run: DemoRun, tmp_path: Path
) -> None:
    """The demo's terminal table has a hidden column: its page shows it beside cost, rows
    cheapest first; the cost lines (three near $12-13) end in labels that never overlap, and
    the reported and expected cached fractions, equal on every call, both stay visible."""
    printed = {
        line.split()[0]: line.split()[-1]
        for line in demo_run.stdout.splitlines()
        if line.startswith(("none ", "shorten_tools", "clear_tool_results"))
    }
    page, problems, _ = open_page(browser, demo_run.out / "report.html")
    assert problems == []
    heads = [th.inner_text() for th in page.query_selector_all("#comparison thead th")]
    assert heads.index("hidden") == heads.index("cost") + 1
    table = page.query_selector_all("#comparison tbody tr")
    costs = [json.loads(tr.query_selector("td[data-field=cost_usd]").get_attribute("data-value"))
             for tr in table]  # fmt: skip
    assert costs == sorted(costs)
    for tr in table:
        name = tr.get_attribute("data-session").removeprefix("demo:")
        assert tr.query_selector("td[data-field=hidden]").inner_text() == printed[name]
    labels = [t.bounding_box() for t in page.query_selector_all("#overview text.end-label")]
    assert len(labels) == 6
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            assert a["y"] + a["height"] <= b["y"] + 0.5 or b["y"] + b["height"] <= a["y"] + 0.5
    dashes = {
        p.get_attribute("stroke-dasharray") for p in page.query_selector_all("path.cumulative")
    }
    assert len(dashes) == 6  # one pattern per session, not only a colour
    section = page.query_selector("section.session")
    assert "coincide on every call" in section.inner_text()
    widths = [p.get_attribute("stroke-width") for p in section.query_selector_all(
        "path.read-fraction, path.expected-fraction")]  # fmt: skip
    assert len(set(widths)) == 2  # the wide pale line shows under the dashed one
    page.screenshot(path=str(tmp_path / "demo-hidden.png"), full_page=True)


def test_a_replays_lists_are_tabled_with_cost_hidden_and_read_backs(
    browser: Any, tmp_path: Path
) -> None:
    def entry(auto: float, hidden: float, readbacks: int) -> dict[str, Any]:
        cost = {"auto": auto, "breakpoints": auto * 1.1, "end_breakpoint": auto * 1.2}
        return {"cost": cost, "hidden_share": hidden, "recoverable_share": 0.0,
                "readback_calls": readbacks}  # fmt: skip

    replay = {"strategies": {"none": entry(13.0, 0.0, 0), "offload,default": entry(5.5, 0.001, 31),
              "default": entry(5.4, 0.02, 0)}}  # fmt: skip
    (tmp_path / "replay.json").write_text(json.dumps(replay))
    out = tmp_path / "report.html"
    args = ["stats", str(ledger(tmp_path)), "--html", str(out), "--replay"]
    assert main([*args, str(tmp_path / "replay.json")]) == 0
    page, problems, _ = open_page(browser, out)
    assert problems == []
    rows = page.query_selector_all("#replay-table tbody tr")
    assert [r.get_attribute("data-strategies") for r in rows] == [
        "default",
        "offload,default",
        "none",
    ]
    cells = {
        td.get_attribute("data-field"): td.inner_text() for td in rows[1].query_selector_all("td")
    }
    assert (cells["cost-auto"], cells["hidden"], cells["readbacks"]) == ("$5.50", "0.1%", "31")
