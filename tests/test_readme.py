"""The README and the guides in docs/: their code runs, their commands match CI, their tables and
links hold, and they stay written for users (a short README, short guides that open with an
example, no development history). The design notes in docs/design/ are held to the same code,
link and history checks, but not counted in the guides' size.

The scripts in examples/ are run by tests/test_examples.py.
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ctxmw.strategies
from ctxmw.cli import _parser, main
from ctxmw.settings import DEFAULT_STRATEGIES, Settings
from tests.conftest import DemoRun

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
DESIGN = sorted((ROOT / "docs" / "design").glob("*.md"))
PAGES = [README, *DOCS, *DESIGN]
README_MAX_BYTES = 15_000
GUIDES_MAX_BYTES = 80_000
FIRST_SCREEN_LINES = 40
# Pages that are lists, not guides: they open with links or a table, not with an example.
NOT_GUIDES = {"index.md", "settings.md"}

# Hex words that are not commit hashes: the offload handle of docs/offload.md's example.
NOT_HASHES = {"002822306121d3ff", "3f2a9c1b7d4e5a60"}  # read-back handles the guides show
HISTORY = re.compile(r"\b[Ii]ssues? #?\d+|\bthis round\b|\bcommit [0-9a-f]{7}", re.IGNORECASE)
HEX_WORD = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
SLOW = pytest.mark.slow


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _blocks(page: Path, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", page.read_text(), flags=re.DOTALL)


def _python_blocks() -> list[Any]:
    """Every python block; the README's in the fast suite, the docs' (a Python start and
    litellm's import each) in the slow tier."""
    return [
        pytest.param(page, index, id=f"{_name(page)}#{index}", marks=() if page == README else SLOW)
        for page in PAGES
        for index in range(len(_blocks(page, "python")))
    ]


@pytest.mark.parametrize(("page", "index"), _python_blocks())
def test_python_blocks_run(page: Path, index: int, tmp_path: Path) -> None:
    script = tmp_path / f"block_{index}.py"
    script.write_text(_blocks(page, "python")[index])
    subprocess.run([sys.executable, str(script)], check=True, cwd=tmp_path, timeout=120)


def test_the_readme_and_the_docs_hold_python_blocks() -> None:
    assert _blocks(README, "python")
    assert sum(len(_blocks(page, "python")) for page in DOCS) >= 8


def _fragments() -> list[Any]:
    return [
        pytest.param(page, index, id=f"{_name(page)}#py{index}")
        for page in PAGES
        for index in range(len(_blocks(page, "py")))
    ]


@pytest.mark.parametrize(("page", "index"), _fragments())
def test_python_fragments_compile(page: Path, index: int) -> None:
    """A `py` block is a fragment (a framework's names, an `await` at top level): it cannot run
    alone (examples/ runs each framework whole), but it must be Python that compiles."""
    source = _blocks(page, "py")[index]
    compile(source, f"{_name(page)}#py{index}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def _commands() -> list[Any]:
    """Every `$ ctxmw ...` line of a console, bash or text block, as (page, argv)."""
    found = []
    for page in PAGES:
        blocks = [b for lang in ("console", "bash", "text") for b in _blocks(page, lang)]
        for block in blocks:
            for line in block.splitlines():
                line = line.split("  #", 1)[0].strip()
                if line.startswith("$ ctxmw "):
                    argv = shlex.split(line.removeprefix("$ ctxmw ").split(" > ")[0])
                    found.append(pytest.param(argv, id=f"{_name(page)}: ctxmw {' '.join(argv)}"))
    return found


@pytest.mark.parametrize("argv", _commands())
def test_every_ctxmw_command_in_the_docs_parses(argv: list[str]) -> None:
    """The commands the pages show exist, with the options they show (the parser exits 2 on an
    unknown command or option)."""
    args = _parser().parse_args(argv)
    assert getattr(args, "handler", None) is not None, argv


def test_ci_runs_the_readme_test_command() -> None:
    commands = [b.strip() for b in _blocks(README, "bash")]
    test_command = next(c for c in commands if "pytest" in c)
    assert test_command in (ROOT / ".ci" / "run").read_text()
    assert any(c.endswith("ctxmw demo") for c in commands)


def _table(text: str, head: str) -> list[str]:
    """The lines of the table whose header starts with ``head``, up to a blank or ``...`` line."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(head))
    rows = []
    for line in lines[at:]:
        if not line.strip() or line.startswith("..."):
            break
        rows.append(line.rstrip())
    return rows


@SLOW
def test_the_demo_table_in_the_docs_is_what_the_demo_prints(demo_run: DemoRun) -> None:
    """docs/demo.md shows, to the cent and the token, the table ``ctxmw demo`` prints on this
    tree (rerun it and paste the table after changing anything under ctxmw/)."""
    shown = _table((ROOT / "docs" / "demo.md").read_text(), "strategies ")
    assert shown == _table(demo_run.stdout, "strategies ")


@SLOW
def test_the_readmes_stats_figures_are_what_ctxmw_stats_prints_on_the_demo(
    demo_run: DemoRun, capsys: pytest.CaptureFixture[str]
) -> None:
    block = next(b for b in _blocks(README, "text") if "$ ctxmw stats ctxmw-demo/" in b)
    command, *shown = block.strip().splitlines()
    argv = shlex.split(command.removeprefix("$ ctxmw "))
    capsys.readouterr()
    assert main([a.replace("ctxmw-demo/", f"{demo_run.out}/") for a in argv]) == 0
    assert [line.rstrip() for line in capsys.readouterr().out.strip().splitlines()] == shown


def test_the_readme_shows_an_acompletion_agent_with_a_tool_and_a_save_file() -> None:
    agent = next(b for b in _blocks(README, "python") if "ctxmw.acompletion(" in b)
    assert "tools=[" in agent
    assert "save_file=" in agent
    assert 15 <= len(agent.strip().splitlines()) <= 25


@pytest.mark.parametrize("page", [README, ROOT / "docs" / "strategies.md"], ids=_name)
def test_the_strategy_table_names_every_built_in_strategy(page: Path) -> None:
    rows = [line for line in page.read_text().splitlines() if line.startswith("| `")]
    documented = {match.group(1) for row in rows if (match := re.match(r"\| `(\w+)`", row))}
    assert {*ctxmw.strategies.__all__, "none"} <= documented
    for name in DEFAULT_STRATEGIES:
        assert any(row.startswith(f"| `{name}` (default)") for row in rows), name


def test_the_readme_says_where_the_first_call_waits_and_to_import_ctxmw_first() -> None:
    """Right under the first example, where a user first imports: litellm's import is the wait,
    and importing it before ctxmw fetches its price table."""
    text = README.read_text()
    after = text.split("```python", 1)[1].split("```", 1)[1].split("\n## ", 1)[0]
    assert "Import ctxmw first" in after
    assert "LITELLM_LOCAL_MODEL_COST_MAP=True" in after
    for page in DOCS:
        for block in _blocks(page, "python"):
            imports = [line.split("#")[0].strip() for line in block.splitlines()]
            if "import litellm" in imports:
                assert imports.index("import ctxmw") < imports.index("import litellm"), page


def test_no_install_instruction_names_a_ctxmw_extra_from_the_registry() -> None:
    """ctxmw is installed from a checkout: an extra asked of the registry by name (ctxmw[plot])
    does not resolve, so no page, message or skip reason says so (``pip install -e '.[plot]'``,
    or the package itself)."""
    extra = re.compile(r"pip install ['\"]?ctxmw\[")
    files = [*PAGES, *ROOT.glob("ctxmw/**/*.py"), *ROOT.glob("examples/**/*.*")]
    files += [*ROOT.glob("tests/**/*.py"), ROOT / "pyproject.toml"]
    said = [f"{f.relative_to(ROOT)}" for f in files if extra.search(f.read_text(errors="replace"))]
    assert not said, said


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_what_needs_the_projects_ci_tools_says_so(page: Path) -> None:
    """A user's clone has no ../shared folder: every paragraph that sends the reader there says
    it is the project's CI tools or data, so the reader knows what a clone can run."""
    paragraphs = re.split(r"\n\s*\n", _prose(page))
    unsaid = [p[:80] for p in paragraphs if "../shared" in p and "the project's CI" not in p]
    assert not unsaid, f"{_name(page)}: {unsaid}"


def test_a_test_that_needs_the_projects_ci_data_says_so_when_it_skips(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests import test_open_rounds

    monkeypatch.setattr(test_open_rounds, "SHARED", tmp_path / "shared" / "data" / "transcripts")
    with pytest.raises(pytest.skip.Exception, match="the project's CI data"):
        test_open_rounds.real_transcript("cc_258c7280.jsonl")


def test_the_readme_is_short() -> None:
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/"


def test_the_user_guides_are_short() -> None:
    """docs/*.md is read in well under an hour; rationale and measurements go to docs/design/."""
    size = sum(len(page.read_bytes()) for page in DOCS)
    assert size <= GUIDES_MAX_BYTES, f"docs/*.md is {size} bytes; move design notes to docs/design/"


@pytest.mark.parametrize("page", [p for p in DOCS if p.name not in NOT_GUIDES], ids=_name)
def test_every_guide_shows_an_example_on_its_first_screen(page: Path) -> None:
    first = "\n".join(page.read_text().splitlines()[:FIRST_SCREEN_LINES])
    assert "```" in first, f"{_name(page)}: no example in its first {FIRST_SCREEN_LINES} lines"


def test_the_design_notes_are_linked_from_the_guides() -> None:
    index = (ROOT / "docs" / "design" / "index.md").read_text()
    linked = set(LINK.findall(index))
    assert {page.name for page in DESIGN if page.name != "index.md"} <= linked
    assert "design/index.md" in set(LINK.findall((ROOT / "docs" / "index.md").read_text()))


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_no_development_history(page: Path) -> None:
    text = page.read_text()
    history = [m.group(0) for m in HISTORY.finditer(text)]
    hashes = [m.group(0) for m in HEX_WORD.finditer(text) if m.group(0) not in NOT_HASHES]
    assert not history, f"{_name(page)} mentions development history: {history}"
    assert not hashes, f"{_name(page)} holds what look like commit hashes: {hashes}"


def _prose(page: Path) -> str:
    return re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_relative_links_point_to_existing_files(page: Path) -> None:
    targets = [t for t in LINK.findall(_prose(page)) if "://" not in t and not t.startswith("#")]
    missing = [t for t in targets if not (page.parent / t.split("#", 1)[0]).exists()]
    assert not missing, f"{_name(page)} links to missing files: {missing}"
    anchors = [t for t in targets if "#" in t and t not in missing]
    dangling = [t for t in anchors if _slug(t) not in _anchors(page.parent / t.split("#")[0])]
    assert not dangling, f"{_name(page)} links to missing headings: {dangling}"


def _slug(target: str) -> str:
    return target.split("#", 1)[1]


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to -."""
    headings = re.findall(r"^#+ (.+)$", _prose(page), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_the_docs_index_lists_every_page() -> None:
    index = (ROOT / "docs" / "index.md").read_text()
    linked = set(LINK.findall(index))
    assert {page.name for page in DOCS if page.name != "index.md"} <= linked


@pytest.mark.parametrize("name", list(Settings.model_fields))
def test_every_setting_is_documented_with_its_env_name(name: str) -> None:
    settings = (ROOT / "docs" / "settings.md").read_text()
    row = next((line for line in settings.splitlines() if line.startswith(f"| `{name}` |")), None)
    assert row is not None, f"docs/settings.md has no row for {name}"
    assert f"`CTXMW_{name.upper()}`" in row
    default = Settings.model_fields[name].default
    if name != "compaction_notice":
        assert f"`{default}`" in row


def test_the_docs_tell_how_to_use_ctxmw_inside_agent_frameworks() -> None:
    page = (ROOT / "docs" / "frameworks.md").read_text()
    for name in ("LitellmModel", "LiteLlm", "ChatLiteLLM", "patch_litellm", 'metadata={"ctxmw"'):
        assert name in page
    examples = re.findall(r"`(examples/frameworks_\w+\.py)`", page)
    assert len(examples) == 3
    assert all((ROOT / path).is_file() for path in examples)
