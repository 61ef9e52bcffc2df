"""The generated repository :mod:`ctxmw.replay.coding` agents work in, and what they have seen.

A :class:`Repo` is Python-like modules under ``src/PACKAGE/SUB/`` and their tests under
``tests/SUB/``, written from a small vocabulary, so names such as ``parse_header_value`` and
``TokenBucket`` recur across files as real ones do. :class:`Seen` remembers what tool results
showed, by kind and call, and picks what the next action reuses by age.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from random import Random

__all__ = ["Repo", "Seen"]

_VERBS = [
    "parse",
    "load",
    "build",
    "apply",
    "resolve",
    "render",
    "fetch",
    "update",
    "validate",
    "compute",
    "merge",
    "encode",
]
_NOUNS = [
    "config",
    "header",
    "token",
    "cache",
    "session",
    "prompt",
    "record",
    "index",
    "window",
    "budget",
    "schedule",
    "offset",
    "payload",
    "message",
    "buffer",
    "series",
    "timestamp",
    "column",
    "frame",
]
_PACKAGES = ("pvmodel", "tokenkit", "astrowcs", "sitegen", "ledgerly", "routekit")
_SUBS = ("core", "io", "utils", "models", "plugins", "cli")
_ERRORS = ("ValueError", "TypeError", "KeyError", "IndexError", "AttributeError")
_NAME = re.compile(r"\b(?:[a-z]+_[a-z_]+|[A-Z][a-z]+[A-Z]\w*)\b")


def _function(rng: Random) -> str:
    words = [rng.choice(_VERBS), rng.choice(_NOUNS)]
    if rng.random() < 0.4:
        words.append(rng.choice(_NOUNS))
    return "_".join(words)


def _class(rng: Random) -> str:
    return rng.choice(_NOUNS).title() + rng.choice(_NOUNS).title()


@dataclass
class Repo:
    """Files (path -> lines, edited in place), the names defined, and the tests."""

    files: dict[str, list[str]]
    names: list[str]
    tests: list[str]
    uses: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    @classmethod
    def build(cls, rng: Random, *, modules: int) -> Repo:
        """A repository of ``modules`` source modules, each with a test module."""
        package = rng.choice(_PACKAGES)
        names = sorted(
            {_function(rng) for _ in range(modules * 6)} | {_class(rng) for _ in range(modules)}
        )
        files: dict[str, list[str]] = {}
        tests = []
        for _ in range(modules):
            sub, stem = rng.choice(_SUBS), f"{rng.choice(_NOUNS)}_{rng.choice(_VERBS)}"
            files[f"src/{package}/{sub}/{stem}.py"] = _module(rng, names)
            test = f"tests/{sub}/test_{stem}.py"
            files[test] = _test_module(rng, names, stem)
            tests.append(test)
        repo = cls(files, names, sorted(set(tests)))
        repo.uses = _uses(files)
        return repo

    def task(self, rng: Random) -> str:
        """A request in the user's words: one name, a symptom, nothing the tools will show."""
        name, error = rng.choice(self.names), rng.choice(_ERRORS)
        return (
            f"Calling {name} with an empty input raises {error} instead of returning an empty "
            "result. Please find the cause, fix it, and make sure the tests pass."
        )

    def folder(self, rng: Random) -> str:
        return rng.choice(sorted({path.rsplit("/", 1)[0] for path in self.files}))

    def under(self, folder: str) -> list[str]:
        return sorted(path for path in self.files if path.startswith(folder + "/"))

    def names_in(self, line: str) -> list[str]:
        return _NAME.findall(line)

    def any(self, rng: Random, kind: str) -> str:
        """Something of ``kind`` when the agent has seen nothing of it yet."""
        if kind in ("path", "read"):
            return rng.choice(sorted(self.files))
        if kind == "test":
            return rng.choice(self.tests)
        if kind == "line":
            return f"{rng.choice(sorted(self.files))}:1"
        return rng.choice(self.names)

    def grep(self, name: str, rng: Random) -> list[tuple[str, int, str]]:
        """Lines that mention ``name``: ``(path, line number, line)``, at most 5-40."""
        hits = [
            (path, n + 1, self.files[path][n])
            for path, n in self.uses.get(name, [])
            if name in self.files[path][n]
        ]
        return hits[: rng.randint(5, 40)]

    def edit(self, path: str, number: int, rng: Random) -> tuple[str, str]:
        """Change line ``number`` of ``path``: the old and the new line."""
        old = self.files[path][number]
        new = old.rstrip() + rng.choice(
            (" or []", "  # guard empty input", " if value else None", "[:limit]")
        )
        self.files[path][number] = new
        return old, new

    def test_output(self, target: str, rng: Random) -> tuple[str, list[tuple[str, str, int, str]]]:
        """Pytest's output for ``target`` and its failures ``(test id, path, line, name)``."""
        test = target.split("::", 1)[0]
        lines = [
            "============================= test session starts ==============================",
            f"collected {rng.randint(4, 60)} items",
            "",
        ]
        failures = []
        for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
            failure = self._failure(test, rng)
            failures.append(failure[0])
            lines += failure[1]
        for _ in range(rng.randint(5, 60)):
            lines.append(f"{test}::test_{_function(rng)} PASSED")
        verdict = f"{len(failures)} failed" if failures else "all passed"
        lines.append(f"========================= {verdict} in {rng.uniform(0.2, 9):.2f}s ==")
        return "\n".join(lines), failures

    def _failure(self, test: str, rng: Random) -> tuple[tuple[str, str, int, str], list[str]]:
        name, error = rng.choice(self.names), rng.choice(_ERRORS)
        test_id = f"{test}::test_{name.lower()}_empty"
        lines = [f"_____ test_{name.lower()}_empty _____", ""]
        frame = ("", 0, name)
        for _ in range(rng.randint(2, 6)):
            path = rng.choice(sorted(self.files))
            n = rng.randrange(len(self.files[path]))
            frame = (path, n + 1, rng.choice(self.names_in(self.files[path][n]) or [name]))
            lines += [f"{path}:{n + 1}: in {frame[2]}", f"    {self.files[path][n].strip()}"]
        lines += [f"E   {error}: {name} got an empty sequence", ""]
        lines.append(f"FAILED {test_id} - {error}: {name} got an empty sequence")
        return (test_id, frame[0], frame[1], frame[2]), lines


def _module(rng: Random, names: list[str]) -> list[str]:
    lines = ['"""Module docstring."""', "", "from __future__ import annotations", ""]
    for _ in range(rng.randint(6, 30)):
        fn, helper, other = rng.choice(names), rng.choice(names), rng.choice(names)
        var, arg = rng.choice(_NOUNS), rng.choice(_NOUNS)
        lines += [
            f"def {fn}({arg}, limit={rng.randint(1, 4096)}):",
            f'    """{fn.replace("_", " ").capitalize()} from the {arg}."""',
            f"    {var} = {helper}({arg}, {rng.randint(0, 999)})",
            f"    if not {var}:",
            f'        raise {rng.choice(_ERRORS)}(f"{fn}: empty {arg} {{{arg}!r}}")',
            f"    return {other}({var})[:limit]",
            "",
        ]
    return lines


def _test_module(rng: Random, names: list[str], stem: str) -> list[str]:
    lines = [f'"""Tests of {stem}."""', "", "import pytest", ""]
    for _ in range(rng.randint(3, 10)):
        fn = rng.choice(names)
        lines += [
            f"def test_{fn.lower()}_empty():",
            f"    assert {fn}([]) == []",
            "",
        ]
    return lines


def _uses(files: dict[str, list[str]]) -> dict[str, list[tuple[str, int]]]:
    uses: dict[str, list[tuple[str, int]]] = {}
    for path, lines in files.items():
        for n, line in enumerate(lines):
            for name in dict.fromkeys(_NAME.findall(line)):
                uses.setdefault(name, []).append((path, n))
    return uses


class Seen:
    """What tool results showed, by kind (path, symbol, line, test, code, read) and call."""

    def __init__(self, rng: Random, median_age: float, spread: float) -> None:
        self._rng = rng
        self._log_median = math.log(median_age)
        self._spread = spread
        self._calls: dict[str, list[int]] = {}
        self._items: dict[str, list[list[str]]] = {}

    def add(self, kind: str, items: list[str], call: int) -> None:
        if not items:
            return
        calls, batches = self._calls.setdefault(kind, []), self._items.setdefault(kind, [])
        if calls and calls[-1] == call:
            batches[-1].extend(items)
        else:
            calls.append(call)
            batches.append(list(items))

    def has(self, kind: str) -> bool:
        return bool(self._calls.get(kind))

    def pick(self, kind: str, now: int) -> str | None:
        """Something of ``kind`` shown about a lognormal number of calls ago, or None."""
        calls = self._calls.get(kind)
        if not calls:
            return None
        age = self._rng.lognormvariate(self._log_median, self._spread)
        at = max(bisect_right(calls, now - age) - 1, 0)
        return self._rng.choice(self._items[kind][at])
