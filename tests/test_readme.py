"""The README's code runs, its commands match CI, and its settings table matches Settings.

The scripts in examples/ are run by tests/test_examples.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ctxmw.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.DOTALL)


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_python_blocks_run(index: int, tmp_path: Path) -> None:
    script = tmp_path / f"block_{index}.py"
    script.write_text(_blocks("python")[index])
    subprocess.run([sys.executable, str(script)], check=True, cwd=tmp_path, timeout=120)


def test_ci_runs_the_readme_test_command() -> None:
    commands = [b.strip() for b in _blocks("bash")]
    test_command = next(c for c in commands if "pytest" in c)
    assert test_command in (ROOT / ".ci" / "run").read_text()
    assert any(c.endswith("ctxmw demo") for c in commands)


@pytest.mark.parametrize("name", list(Settings.model_fields))
def test_every_setting_is_documented_with_its_env_name(name: str) -> None:
    row = next((line for line in README.splitlines() if line.startswith(f"| `{name}` |")), None)
    assert row is not None, f"README settings table has no row for {name}"
    assert f"`CTXMW_{name.upper()}`" in row
    default = Settings.model_fields[name].default
    if name != "compaction_notice":
        assert f"`{default}`" in row


def test_the_readme_tells_how_to_use_ctxmw_inside_agent_frameworks() -> None:
    section = README.split("## Use inside agent frameworks", 1)[1].split("\n## ", 1)[0]
    for name in ("LitellmModel", "LiteLlm", "ChatLiteLLM", "patch_litellm", 'metadata={"ctxmw"'):
        assert name in section
    examples = re.findall(r"`(examples/frameworks_\w+\.py)`", section)
    assert len(examples) == 3
    assert all((ROOT / path).is_file() for path in examples)
