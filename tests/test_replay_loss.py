"""What replay counts as a reference, and when a prompt shows, hides or points to one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from ctxmw.cli import main
from ctxmw.replay import ReplayResult, call_points, distinctive, replay
from ctxmw.replay.loss import CallLoss, ReferenceIndex, action_text
from ctxmw.telemetry.counters import ApproxCounter
from ctxmw.types import Messages
from tests.transcripts import call

PATH = "src/pkg/cache_keys.py"
FUNC = "build_cache_key"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("open src/ctxmw/replay.py:142 now", ["src/ctxmw/replay.py:142"]),
        ("see Spotter.Repo and LiveView", ["Spotter.Repo", "LiveView"]),
        ("max_tool_chars=4000", ["max_tool_chars"]),
        ("the id 1234567890 and 2024-06-01", ["1234567890", "2024-06-01"]),
        ("HTTPServer, data-message-id", ["HTTPServer", "data-message-id"]),
        ("it is in src/pkg/cache_keys.py.", [PATH]),  # the full stop is not part of the path
        ("a flag --show-call and a dir src/pkg/", ["show-call"]),
        ("migration Annotation IMPORTANT understanding", []),  # plain words, however long
        ("short a_b 1234567 x.y", []),  # under eight characters
        ("C:\\path\\to\\cache_keys.py", ["cache_keys.py"]),  # a backslash ends a token
    ],
)
def test_distinctive_strings(text: str, expected: list[str]) -> None:
    assert distinctive(text) == expected


def test_distinctive_strings_are_listed_once_in_order() -> None:
    assert distinctive("bb_second aa_first bb_second aa_first") == ["bb_second", "aa_first"]


def test_an_action_is_its_text_and_its_argument_values_not_its_keys() -> None:
    msg = assistant("Edit it.", path=PATH, options={"old_string": FUNC, "lines": [FUNC + "_2"]})
    text = action_text(msg)
    assert PATH in text
    assert FUNC in text
    assert FUNC + "_2" in text
    assert "old_string" not in text
    assert "path" not in text


def assistant(content: str | None = None, **arguments: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if arguments:
        msg["tool_calls"] = [call(f"c{len(json.dumps(arguments))}", "edit", **arguments)]
    return msg


def conversation(*, user_says: str = "Fix the cache.") -> Messages:
    """A read whose result shows a path and a function, then an edit that uses both."""
    read = call("r1", "read", path="src")
    return [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": user_says},
        {"role": "assistant", "content": None, "tool_calls": [read]},
        {"role": "tool", "tool_call_id": "r1", "content": f"{PATH}:12: def {FUNC}(model):"},
        {"role": "assistant", "content": f"The bug is in {FUNC}.", "tool_calls": [edit_call()]},
        {"role": "tool", "tool_call_id": "e1", "content": "edited"},
        {"role": "assistant", "content": "Done."},
    ]


def edit_call() -> dict[str, Any]:
    return call("e1", "edit", path=PATH, old="return model")


def test_references_are_strings_first_seen_in_a_tool_result() -> None:
    index = ReferenceIndex(conversation())
    assert [text for text, _ in index.references(4)] == [FUNC, PATH]
    assert all(where == [3] for _, where in index.references(4))
    assert index.references(2) == []
    assert index.references(6) == []


def test_a_string_the_user_typed_first_is_not_a_reference() -> None:
    index = ReferenceIndex(conversation(user_says=f"Fix {FUNC}, it ignores the model."))
    assert [text for text, _ in index.references(4)] == [PATH]


def test_a_string_the_agent_wrote_first_is_not_a_reference() -> None:
    messages = conversation()
    messages[2] = {**messages[2], "content": f"Let me look for {PATH}."}
    assert [text for text, _ in ReferenceIndex(messages).references(4)] == [FUNC]


def test_a_full_result_shows_its_references() -> None:
    messages = conversation()
    loss = ReferenceIndex(messages).measure(4, messages[:4])
    assert loss == CallLoss(references=2, shown=2)


def test_a_dropped_result_loses_its_references() -> None:
    messages = conversation()
    prompt = [*messages[:2], {"role": "user", "content": "[two messages dropped]"}]
    loss = ReferenceIndex(messages).measure(4, prompt)
    assert (loss.references, loss.shown, loss.recoverable, loss.gone) == (2, 0, 0, 2)
    assert {(item.text, item.source, item.source_shown) for item in loss.lost} == {
        (FUNC, 3, "dropped"),
        (PATH, 3, "dropped"),
    }


def test_a_compacted_result_shows_what_it_kept() -> None:
    messages = conversation()
    kept = {**messages[3], "content": f"[compacted] def {FUNC}(model): ..."}
    loss = ReferenceIndex(messages).measure(4, [*messages[:3], kept])
    assert (loss.shown, loss.gone) == (1, 1)
    assert [(item.text, item.source_shown) for item in loss.lost] == [(PATH, "compacted")]


def test_a_reference_shown_anywhere_else_counts_as_shown() -> None:
    messages = conversation()
    note = {"role": "user", "content": f"(summary: {PATH} defines {FUNC})"}
    loss = ReferenceIndex(messages).measure(4, [*messages[:2], note])
    assert loss == CallLoss(references=2, shown=2)


def test_an_offloaded_result_is_recoverable() -> None:
    messages = conversation()
    prompt = anyio.run(_offloaded_prompt, messages)
    assert prompt[3] is not messages[3]
    loss = ReferenceIndex(messages).measure(4, prompt)
    assert (loss.shown, loss.recoverable, loss.gone) == (1, 1, 0)
    assert [item.text for item in loss.lost] == [PATH]


async def _offloaded_prompt(messages: Messages) -> Messages:
    """Offload with a preview too short to show the path (it keeps the handle)."""
    from ctxmw import Settings
    from ctxmw.strategies._chain import apply_strategies, resolve_strategies
    from ctxmw.types import StrategyContext

    settings = Settings(offload_threshold=1, offload_preview="tail", offload_preview_chars=23)
    ctx = StrategyContext(settings=settings, model="openai/gpt-4o", memo={})
    return await apply_strategies(messages[:4], resolve_strategies("offload", settings), ctx)


def test_replay_counts_shown_recoverable_and_gone_per_list() -> None:
    messages = conversation()
    result = anyio.run(_replay, messages, ["clear_tool_results"])
    none, clear = result.strategies["none"], result.strategies["clear_tool_results"]
    assert (none.references, none.shown, none.gone, none.hidden_share) == (2, 2, 0, 0.0)
    assert (clear.references, clear.gone) == (2, 2)
    assert clear.hidden_share == 1.0
    entry = result.to_json()["strategies"]["clear_tool_results"]
    assert entry["references_gone"] == 2
    assert entry["hidden_share"] == 1.0


async def _replay(messages: Messages, lists: list[str]) -> ReplayResult:
    settings = {"clear_tool_results_trigger": 0, "clear_tool_results_keep": 0}
    return await replay(
        [messages], lists, settings=settings, counter=ApproxCounter(), optimal=False
    )


def test_every_call_point_is_measured_once() -> None:
    messages = conversation()
    result = anyio.run(_replay, messages, ["clear_tool_results"])
    calls = result.strategies["none"].calls
    assert [c.message_index for c in calls] == call_points(messages)
    assert [c.loss.references for c in calls] == [0, 2, 0]


def test_show_call_prints_the_prompt_and_its_hidden_references(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(conversation()))
    argv = ["replay", str(path), "--show-call", "2", "--strategies", "clear_tool_results"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CTXMW_CLEAR_TOOL_RESULTS_TRIGGER", "0")
        mp.setenv("CTXMW_CLEAR_TOOL_RESULTS_KEEP", "0")
        assert main(argv) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "--show-call 2: 1/2 prompts computed" in captured.err  # progress, on stderr
    assert "call 2 (the assistant message at index 4)" in out
    assert "references: 2, shown 0, recoverable 0, gone 2" in out
    assert f"gone: {PATH!r} (first in the tool result at index 3, compacted" in out


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (["--show-call", "9"], "has 3 call points; pick one from 1 to 3"),
        (["--show-call", "1", "--strategies", "none;default"], "shows one strategy list"),
        (["--show-call", "1", "--synthetic", "3"], "needs exactly one transcript"),
    ],
)
def test_show_call_says_what_it_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], problem: str
) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(conversation()))
    assert main(["replay", str(path), *extra]) == 2
    assert problem in capsys.readouterr().err
