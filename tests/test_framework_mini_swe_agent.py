"""ctxmw inside mini-swe-agent (synchronous, ``litellm.completion``), through ``patch_litellm``.

The agent runs in the test's thread; the scripted provider on a loop of its own thread. The
environment is a stand-in that answers every bash command with a 4 KB output.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from ctxmw.demo.scripted import ScriptedProvider
from tests._frameworks import (
    MODEL,
    assert_faithful_sync,
    assert_one_transcript_that_replays_sync,
    calls_through,
    scripted_provider_thread,
)
from tests._long_run import CALLS, assert_kept_promises, audit, big_result, ledger_lines

# mini-swe-agent makes its config folder on import: a temporary one, not the user's.
os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mswea-"))
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
pytest.importorskip("minisweagent")
from minisweagent.agents.default import DefaultAgent
from minisweagent.models.litellm_model import LitellmModel

pytestmark = pytest.mark.slow  # the framework runs: the slow tier


class Outputs:
    """An environment whose every command prints 4 KB."""

    def __init__(self) -> None:
        self.commands = 0

    def execute(self, action: dict[str, Any], cwd: str = "", **_: Any) -> dict[str, Any]:
        self.commands += 1
        return {"output": big_result(self.commands), "returncode": 0, "exception_info": ""}

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return dict(kwargs)

    def serialize(self) -> dict[str, Any]:
        return {}


def make_agent(base: str, save_file: Path, steps: int) -> DefaultAgent:
    model = LitellmModel(
        model_name=MODEL,
        model_kwargs={
            "api_base": base,
            "api_key": "scripted",
            "metadata": {"ctxmw": {"save_file": str(save_file)}},
        },
        cost_tracking="ignore_errors",  # the scripted model has no price
    )
    return DefaultAgent(
        model,
        Outputs(),
        system_template="You are a careful engineer.",
        instance_template="Task: {{task}}",
        step_limit=steps,
    )


def test_every_call_goes_through_ctxmw_and_is_saved(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    with (
        scripted_provider_thread(ScriptedProvider(tool_rounds=CALLS)) as (server, base),
        calls_through(prompt_strategies="none") as passed,
    ):
        result = make_agent(base, save_file, steps=5).run("fix the bug")
    assert result["exit_status"] == "LimitsExceeded"
    assert len(server.requests) == len(passed) == 5
    assert_faithful_sync(server, passed, save_file, open_calls=True)
    assert len(ledger_lines(save_file)) == 5


@pytest.mark.usefixtures("shortening_tiers")
def test_a_long_run_is_shortened_and_keeps_every_promise(tmp_path: Path) -> None:
    save_file = tmp_path / "agent.jsonl"
    with (
        scripted_provider_thread(ScriptedProvider(tool_rounds=CALLS)) as (server, base),
        calls_through() as passed,
    ):
        make_agent(base, save_file, steps=CALLS).run("fix the bug")
    found = audit(server.prompts, passed)
    assert_kept_promises(found, "mini-swe-agent")
    assert_one_transcript_that_replays_sync(save_file, passed[-1], open_calls=True)
    assert len(ledger_lines(save_file)) == CALLS
