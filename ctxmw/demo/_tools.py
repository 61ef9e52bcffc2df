"""The demo agent's tools: list, read (numbered lines), grep, run the tests, edit.

They work on one directory tree (by default, the installed ctxmw package) and never write to
it: an edit goes to an in-memory copy of the file that later reads and tests see, so one
session's edits live as long as its tool box. ``run_tests`` is simulated: a pytest-style report
made from the module's own functions, one of which fails until an edit touches it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

__all__ = ["EDIT_MARK", "ToolBox"]

EDIT_MARK = "  # reviewed"
"""What the demo's edits append to the first line they quote (no line is added or removed)."""

_DEF = re.compile(r"^\s*(?:async\s+)?def (\w+)\(")


class ToolBox:
    """Tools over one directory tree; edits stay in memory (see the module docstring).

    Args:
        root: the tree the tools may read.
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._edited: dict[str, str] = {}

    def _path(self, relative: str) -> Path:
        path = (self.root / relative).resolve()
        if not path.is_relative_to(self.root):
            raise ValueError(f"path {relative!r} is outside the tree the tools may read")
        return path

    def text_lines(self, relative: str) -> list[str]:
        """The lines of a file as the tools see it now (this box's edits included)."""
        text = self._edited.get(relative)
        if text is None:
            text = self._path(relative).read_text(encoding="utf-8", errors="replace")
        return text.splitlines()

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
        """Read lines of a text file, each after its number and an arrow.

        Args:
            path: path relative to the project root.
            start: first line to read (1-based).
            lines: how many lines to read at most.
        """
        text = self.text_lines(path)
        chunk = text[start - 1 : start - 1 + lines]
        body = "\n".join(numbered(n, line) for n, line in enumerate(chunk, start))
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
            relative = str(file.relative_to(self.root))
            for n, line in enumerate(self.text_lines(relative), 1):
                if regex.search(line):
                    hits.append(f"{relative}:{n}: {line.strip()}")
        return "\n".join(hits) or "no matches"

    def run_tests(self, path: str) -> str:
        """Run the tests of one module; prints each test's outcome and the first failure.

        Args:
            path: the module, relative to the project root.
        """
        lines = self.text_lines(path)
        found = functions(lines)
        failing = failing_function(path, lines)
        stem = Path(path).stem.lstrip("_")
        out = [
            f"tests/test_{stem}.py::test_{name} {'FAILED' if name == failing else 'PASSED'}"
            for name, _, _ in found
        ]
        if failing is None:
            return "\n".join([*out, f"{len(found)} passed"])
        _, first, _ = next(f for f in found if f[0] == failing)
        out += [
            f"_____ test_{failing} _____",
            f"{path}:{first}: in {failing}",
            f"    {lines[first - 1].strip()}",
            f"E   AssertionError: {failing} returned the wrong value",
            f"1 failed, {len(found) - 1} passed",
        ]
        return "\n".join(out)

    def edit_file(self, path: str, old: str, new: str) -> str:
        """Replace the one occurrence of ``old`` in a file by ``new``.

        Args:
            path: path relative to the project root.
            old: the exact text to replace (whole lines, as read).
            new: the text to put in its place.
        """
        text = "\n".join(self.text_lines(path))
        count = text.count(old)
        if count != 1:
            return f"Error: {path} holds the text to replace {count} times; it must be once."
        at = text[: text.index(old)].count("\n") + 1
        self._edited[path] = text.replace(old, new)
        shown = new.splitlines()
        body = "\n".join(numbered(n, line) for n, line in enumerate(shown, at))
        return f"Edited {path}: lines {at}-{at + len(shown) - 1} now read\n{body}"


def numbered(n: int, line: str) -> str:
    """One line as ``read_file`` shows it."""
    return f"{n:>6}→{line}"


def functions(lines: list[str]) -> list[tuple[str, int, int]]:
    """The functions of a module: (name, first line, last line), in order."""
    starts = [(m.group(1), i + 1) for i, line in enumerate(lines) if (m := _DEF.match(line))]
    ends = [s for _, s in starts[1:]] + [len(lines) + 1] * bool(starts)
    return [(name, s, e - 1) for (name, s), e in zip(starts, ends, strict=True)]


def failing_function(path: str, lines: list[str]) -> str | None:
    """The function the simulated tests of ``path`` fail on: one picked by the path, until an
    edit marks it reviewed (then none fails)."""
    found = functions(lines)
    if not found:
        return None
    pick = int(hashlib.sha256(path.encode()).hexdigest(), 16) % len(found)
    name, first, last = found[pick]
    if any(EDIT_MARK in line for line in lines[first - 1 : last]):
        return None
    return name
