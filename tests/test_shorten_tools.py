"""shorten_tools: tiers by count and by characters, recomputed every call, never a notice."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import ctxmw
from ctxmw import validate
from ctxmw.strategies.shorten_tools import shorten_tools
from ctxmw.types import Messages
from tests.transcripts import LONG_ARG, LONG_OUT, adjacent_calls, call, classify, group, span

Run = Callable[..., Messages]


def _args_compacted(source: Messages, prompt: Messages) -> list[int]:
    """Forward numbers whose call arguments the prompt shows compacted."""
    shown = {m["tool_calls"][0]["id"]: m for m in prompt if m.get("tool_calls")}
    ids = [m["tool_calls"][0]["id"] for m in source if m.get("tool_calls")]
    return [f for f, cid in enumerate(ids, 1) if cid in shown and "[compacted:" in str(shown[cid])]


def test_count_tiers_without_character_budget(run: Run) -> None:
    source = adjacent_calls(50)
    prompt = run(shorten_tools, source, max_tool_chars=0)
    assert classify(source, prompt) == {
        "dropped": span(1, 10),
        "compacted": span(11, 40),
        "full": span(41, 50),
    }
    # full_tool_calls = 0: every kept call's long arguments are compacted.
    assert _args_compacted(source, prompt) == span(11, 50)


def test_character_budget_keeps_more_full(run: Run) -> None:
    source = adjacent_calls(50)
    # Newest first, each call spends its result's and its arguments' characters.
    per_call = len(source[3]["content"]) + len(source[2]["tool_calls"][0]["function"]["arguments"])
    prompt = run(shorten_tools, source, max_tool_chars=per_call * 15, full_tool_outputs=0)
    assert classify(source, prompt)["full"] == span(36, 50)


def test_what_its_one_description_says_with_the_default_settings(run: Run) -> None:
    """The newest 10 results full, more while the kept ones stay under 100,000 characters; of the
    newest 40 calls, those past that budget compacted; older ones dropped."""
    source: Messages = [{"role": "user", "content": "Read the logs."}]
    for f in range(1, 61):
        source += group([call(f"c{f}", path=f"log{f}")], [f"{f:03d} worker ok\n" * 300])
    regions = classify(source, run(shorten_tools, source))
    full = len(regions["full"])
    assert 10 < full < 40  # past the newest 10, while the budget lasts
    assert regions["full"] == span(61 - full, 60)
    assert regions["compacted"] == span(21, 60 - full)  # the rest of the newest 40
    assert regions["dropped"] == span(1, 20)


def test_the_readme_the_guide_and_the_registry_describe_it_alike() -> None:
    root = Path(__file__).resolve().parents[1]
    rows = [
        next(line for line in page.read_text().splitlines() if line.startswith(ROW))
        for page in (root / "README.md", root / "docs" / "strategies.md")
    ]
    assert rows[0] == rows[1]
    assert "compacted" in rows[0]
    assert "dropped" in rows[0]
    (info,) = [i for i in ctxmw.list_strategies() if i.name == "shorten_tools"]
    assert "compact" in info.description
    assert "drop" in info.description


ROW = "| `shorten_tools` |"


def test_everything_fits_the_default_budget(run: Run) -> None:
    source = adjacent_calls(30)
    assert run(shorten_tools, source) == source


def test_a_call_beyond_max_tool_outputs_is_dropped_with_its_result(run: Run) -> None:
    source = adjacent_calls(50)
    prompt = run(shorten_tools, source, max_tool_chars=0, max_tool_outputs=20)
    validate(prompt)
    assert classify(source, prompt) == {
        "dropped": span(1, 30),
        "compacted": span(31, 40),
        "full": span(41, 50),
    }


def test_a_call_beyond_max_tool_calls_is_dropped_with_its_result(run: Run) -> None:
    source = adjacent_calls(50)
    prompt = run(shorten_tools, source, max_tool_chars=0, max_tool_calls=25, max_tool_outputs=45)
    validate(prompt)
    assert classify(source, prompt)["dropped"] == span(1, 25)


def test_the_message_that_crosses_max_tool_chars_is_kept_full(run: Run) -> None:
    source = adjacent_calls(50)
    per_call = len(source[-1]["content"]) + len(
        source[-2]["tool_calls"][0]["function"]["arguments"]
    )
    # 14 calls fit; the 15th result starts below the limit and crosses it: kept, like the seed.
    prompt = run(shorten_tools, source, max_tool_chars=per_call * 14 + 1, full_tool_outputs=0)
    assert classify(source, prompt)["full"] == span(36, 50)
    assert _args_compacted(source, prompt) == span(11, 36)


def test_protected_calls_spend_the_character_budget(run: Run) -> None:
    source = [*adjacent_calls(20), {"role": "user", "content": "Now the next task."}]
    for f in range(21, 26):
        tc = call(f"call_{f}", "read", path=f"file_{f}", pad=LONG_ARG)
        source += group([tc], [f"{LONG_OUT} result {f}"])
    turn = source[-10:]
    size = sum(len(m.get("content") or m["tool_calls"][0]["function"]["arguments"]) for m in turn)
    prompt = run(
        shorten_tools,
        source,
        max_tool_chars=size,
        full_tool_outputs=0,
        shorten_tools_protect_current_turn=True,
    )
    # The current turn is kept full and has used the whole budget: nothing older is full.
    assert classify(source, prompt) == {
        "dropped": [],
        "compacted": span(1, 20),
        "full": span(21, 25),
    }


def test_protect_current_turn_keeps_the_whole_turn_full(run: Run) -> None:
    source = adjacent_calls(50)
    prompt = run(shorten_tools, source, max_tool_chars=0, shorten_tools_protect_current_turn=True)
    assert prompt == source


def test_never_adds_a_notice(run: Run) -> None:
    source = adjacent_calls(80)
    prompt = run(shorten_tools, source, max_tool_chars=0)
    users = [m for m in prompt if m["role"] == "user"]
    assert users == [m for m in source if m["role"] == "user"]
