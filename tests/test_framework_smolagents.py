"""ctxmw inside smolagents (``LiteLLMModel``: synchronous, ``litellm.completion``), through
``patch_litellm``; ctxmw's options travel in the model's ``metadata=``.

smolagents keeps its tool history as text: a tool call is an assistant message reading
"Calling tools: ...", its result a user message "Observation: ...". No tool pairs, so the
tool-result strategies (the default chain's) have nothing to shorten; ``compact`` folds the
older turns all the same, once the prompt fills its share of the window.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from ctxmw.context.readback import READBACK_TOOL
from tests._frameworks import (
    MODEL,
    assert_faithful_sync,
    assert_one_transcript_that_replays_sync,
    calls_through,
    scripted_provider_thread,
)
from tests._long_run import CALLS, assert_kept_promises, audit, big_result, ledger_lines

pytest.importorskip("smolagents")
from smolagents import LiteLLMModel, Tool, ToolCallingAgent, tool

pytestmark = pytest.mark.slow  # the framework runs: the slow tier

# compact's trigger is a share of the input window: a small window makes a 120-call run of
# 4 KB observations (about 125k tokens) fold as a long one does in a real 128k-200k window.
WINDOW = 20_000


def make_agent(save_file: Path, base: str, steps: int, **options: Any) -> ToolCallingAgent:
    counter = itertools.count(1)

    @tool
    def read_log(path: str) -> str:
        """Read a log file.

        Args:
            path: the log's path.
        """
        return big_result(next(counter))

    ctxmw_options = {"save_file": str(save_file), **options}
    model = LiteLLMModel(
        model_id=MODEL, api_base=base, api_key="scripted", metadata={"ctxmw": ctxmw_options}
    )
    tools: list[Tool] = [read_log]
    return ToolCallingAgent(tools=tools, model=model, max_steps=steps, verbosity_level=0)


def test_the_default_chain_sends_the_text_history_as_it_is(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    with scripted_provider_thread() as (server, base), calls_through() as passed:
        make_agent(save_file, base, steps=6).run("Find the error in the logs.")
    # six steps, then the answer smolagents asks for at its step limit
    assert len(server.requests) == len(passed) == 7
    assert "Observation:" in str(server.prompts[-1])
    assert not [m for m in server.prompts[-1] if m["role"] == "tool" or m.get("tool_calls")]
    # No ctxmw option reaches the provider; the one ctxmw name it gets is the read-back tool,
    # declared after the agent's own on every call with tools (the last one, at the step limit,
    # has none).
    assert "ctxmw" not in str(
        [{k: v for k, v in r.items() if k != "tools"} for r in server.requests]
    )
    assert all(r["tools"][-1] == READBACK_TOOL for r in server.requests if r.get("tools"))
    assert_faithful_sync(server, passed, save_file)
    assert len(ledger_lines(save_file)) == 7


def test_a_long_run_is_folded_by_compact_and_keeps_every_promise(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    options = {"prompt_strategies": ["compact"], "settings": {"context_window": WINDOW}}
    with scripted_provider_thread() as (server, base), calls_through() as passed:
        make_agent(save_file, base, steps=CALLS - 1, **options).run("Find the error in the logs.")
    found = audit(server.prompts, passed)
    assert_kept_promises(found, "smolagents (compact)")
    assert_one_transcript_that_replays_sync(save_file, passed[-1])
    assert len(ledger_lines(save_file)) == CALLS
