"""Every script in examples/ runs offline, exits 0 and prints what it promises."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a Python start and litellm's import per script: the slow tier

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("*.py"))
PROMISES = {
    "inbox_never_lost.py": [
        "Notes back in the inbox: 1",
        "The retried call's last message: Also check the nightly logs.",
        "Delivered notes on record: 1",
    ],
    "cache_alerts.py": [
        "ALERT bust_tools:",
        "ctxmw stats --check exit code: 1",
        "self-contained",
    ],
    "drop_in_telemetry.py": [
        "ctxmw call 2 session=head-",
        "read=1280 expected=1280 prefix_local=1359 hit=62.6% so far",
        "openai/gpt-4o      3   4,088  2,560     2,560  62.6%",
    ],
    "tool_agent.py": [
        "Model calls: 3",
        "I reordered 24",
        "Error: tool 'stock' raised KeyError",
        "<- reorder [call_",
    ],
    "retry_after_provider_error.py": [
        "saved so far: 0 messages",
        "waiting to be sent: 'What is the capital of France?'",
        "answer: Paris.",
        "saved now: ['user', 'assistant']",
    ],
    "save_file_faults.py": [
        "full disk: agent.jsonl not written, errno 27",
        "bytes in the save_file: 0",
        "after freeing space: The log is fine. tools run: 1",
        "sent after the crash: ['user', 'user'] tools run again: []",
        "set aside, still in the file: ['user', 'assistant']",
    ],
    "readback.py": [
        "the model sees: [compacted: 8 of 80 lines shown, 2790 chars; ctxmw_expand handle",
        "... its last line: … lines 9-80",
        "lines 60-62 of 80; earlier output] |     60→def step_3_60(): return 360 |",
        "the caller got: step_3_61 returns 361. None",
        "tools sent: ['read_file', 'ctxmw_expand']",
        "ledger, readback per call: [False, True]",
        "the caller's calls: ['read_file']",
        "the next prompt's reply calls: ['read_file', 'ctxmw_expand']",
        "then the results: ['(empty)', '    50→def step_2_50(): return 250']",
        "ctxmw_expand in the caller's history: False",
    ],
    "replay_loss.py": ["88 calls, 159 references", "default ", "the prompt before message"],
    "sync_completion.py": [
        "ctxmw.completion: 12 apples. model calls: 2",
        "sync agent: 61 model calls, every prompt valid: True",
        "one transcript: 122 messages; ledger: 61 calls",
        "from inside a running loop: A worker restarted; no data lost.",
    ],
    "frameworks_openai_agents.py": ["Turn 2: Done: 4", "every prompt valid: True", "one file"],
    "frameworks_google_adk.py": ["Turn 2: Done:", "every prompt valid: True", "one file"],
    "frameworks_langchain.py": ["Turn 2: Done: 4", "every prompt valid: True", "one file"],
}
# The framework examples need the optional group (pip install -e '.[frameworks]'; CI has it).
NEEDS = {
    "frameworks_openai_agents.py": "agents",
    "frameworks_google_adk.py": "google.adk",
    "frameworks_langchain.py": "langchain_litellm",
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script: Path) -> None:
    needed = NEEDS.get(script.name)
    if needed is not None and not _installed(needed):
        pytest.skip(f"{needed} is not installed (pip install -e '.[frameworks]')")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    for promise in PROMISES.get(script.name, []):
        assert promise in done.stdout
