"""Every script in examples/ runs offline, exits 0 and prints what it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("*.py"))
PROMISES = {
    "inbox_never_lost.py": [
        "Notes back in the inbox: 1",
        "The retried call's last message: Also check the nightly logs.",
        "Delivered notes on record: 1",
    ],
    "tool_agent.py": [
        "Model calls: 3",
        "I reordered 24",
        "Error: tool 'stock' raised KeyError",
        "<- reorder [call_",
    ],
}


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    for promise in PROMISES.get(script.name, []):
        assert promise in done.stdout
