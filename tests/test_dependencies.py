"""Every declared runtime dependency is imported by the package: none is declared for nothing."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT_NAMES = {"pydantic-settings": "pydantic_settings"}  # where the two names differ


def declared() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0] for spec in project["dependencies"]]
    return [IMPORT_NAMES.get(n, n.replace("-", "_")) for n in names]


def imported() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "ctxmw").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return found


def test_every_declared_runtime_dependency_is_imported_somewhere() -> None:
    names = declared()
    assert "aiofiles" in names
    assert sorted(set(names) - imported()) == []
