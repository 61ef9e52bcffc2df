"""The demo's scripted agent: real tools over the installed ctxmw package, and a fixed plan.

The plan is a deterministic list of steps; each step is one or more tool calls (parallel calls
in one response). The simulated provider replays it, so every strategy sees the same session.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PlanStep", "ToolBox", "make_plan"]


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One model response: the tool calls it makes, as ``(name, arguments)`` pairs."""

    calls: tuple[tuple[str, dict[str, object]], ...]


class ToolBox:
    """Read-only tools over one directory tree (by default, the installed ctxmw package)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _path(self, relative: str) -> Path:
        path = (self.root / relative).resolve()
        if not path.is_relative_to(self.root):
            raise ValueError(f"path {relative!r} is outside the tree the tools may read")
        return path

    def list_files(self, directory: str = ".") -> str:
        """List the files and folders in a directory of the project, one per line with sizes.

        Args:
            directory: path relative to the project root.
        """
        base = self._path(directory)
        lines = []
        for entry in sorted(base.iterdir()):
            if entry.name.startswith((".", "__pycache__")):
                continue
            size = entry.stat().st_size if entry.is_file() else 0
            kind = "dir " if entry.is_dir() else "file"
            lines.append(f"{kind} {entry.relative_to(self.root)} {size}")
        return "\n".join(lines)

    def read_file(self, path: str, start: int = 1, lines: int = 120) -> str:
        """Read lines of a text file, numbered.

        Args:
            path: path relative to the project root.
            start: first line to read (1-based).
            lines: how many lines to read at most.
        """
        text = self._path(path).read_text(encoding="utf-8", errors="replace").splitlines()
        chunk = text[start - 1 : start - 1 + lines]
        body = "\n".join(f"{n:>5}  {line}" for n, line in enumerate(chunk, start))
        return f"{path} lines {start}-{start + len(chunk) - 1} of {len(text)}\n{body}"

    def grep(self, pattern: str, path: str = ".") -> str:
        """Search files for a regular expression; prints path:line: text for each match.

        Args:
            pattern: a Python regular expression.
            path: a file or directory relative to the project root.
        """
        regex = re.compile(pattern)
        base = self._path(path)
        files = [base] if base.is_file() else sorted(base.rglob("*.py"))
        hits = []
        for file in files:
            text = file.read_text(encoding="utf-8", errors="replace")
            for n, line in enumerate(text.splitlines(), 1):
                if regex.search(line):
                    hits.append(f"{file.relative_to(self.root)}:{n}: {line.strip()}")
        return "\n".join(hits) or "no matches"


def make_plan(root: Path, calls: int) -> list[PlanStep]:
    """A deterministic plan of about ``calls`` tool calls over the files under ``root``."""
    files = sorted(
        str(p.relative_to(root)) for p in root.rglob("*.py") if "__pycache__" not in p.parts
    )
    lengths = {
        f: len((root / f).read_text(encoding="utf-8", errors="replace").splitlines()) for f in files
    }
    dirs = sorted({str(Path(f).parent) for f in files})
    patterns = ["def ", "class ", "import ", "raise ", "return ", "settings", "async "]
    steps: list[PlanStep] = [PlanStep((("list_files", {"directory": d}),)) for d in dirs]
    made = len(steps)
    i = 0
    while made < calls:
        path = files[i % len(files)]
        # Later passes read further windows of each file, wrapping around its length.
        start = 1 + ((i // len(files)) * 120) % max(lengths[path], 1)
        window: dict[str, object] = {"path": path, "start": start}
        step: tuple[tuple[str, dict[str, object]], ...]
        if i % 5 == 4:  # a parallel pair: read one file and grep another
            other = files[(i * 7) % len(files)]
            step = (("read_file", window), ("grep", {"pattern": patterns[i % 7], "path": other}))
        elif i % 11 == 10:  # a repeat of an earlier call, same arguments
            step = (("read_file", {"path": files[0], "start": 1}),)
        else:
            step = (("read_file", window),)
        steps.append(PlanStep(step))
        made += len(step)
        i += 1
    return steps
