"""Generated coding-agent runs whose next actions reuse what earlier tool results said.

:func:`synthetic_transcript` measures cost; its word-salad results hold nothing an agent would
go on to use. These runs model a repository and an agent working in it, so that what a strategy
hides matters (:mod:`ctxmw.replay.loss`): file paths first appear in listings and grep hits,
function names and line numbers in file reads and grep hits, failing test ids and error lines in
test output, and the agent's next action (a read of a path it was shown, an edit whose old text
is a line it read, a grep for a name it saw, a test id from a failure) reuses them. What it
reuses is picked by age: mostly what the last few calls showed, sometimes something from far
back (a lognormal age in calls, median :data:`MEDIAN_AGE`, log-sd :data:`AGE_SPREAD`).

- :func:`swe_run`: a SWE-bench-like run of a tool-calling bash agent (mini-swe-agent's shape):
  one task, 30-120 calls, results of about 1-8 KB (``cat``/``sed -n`` reads, ``grep -n`` hits,
  test and reproduction output), prompts peaking at 15-80k tokens.
- :func:`coding_session`: a long interactive session (Claude Code's shape: ``Read``, ``Edit``,
  ``Grep``, ``Glob``, ``Bash``), ``n_calls`` calls over several user requests, many small
  results (edits, listings) among larger reads and test runs.

Both are deterministic: the same arguments always give the same transcript.
"""

from __future__ import annotations

import json
import random
from typing import Any

from ctxmw.replay._repo import Repo, Seen
from ctxmw.types import Messages

__all__ = ["AGE_SPREAD", "MEDIAN_AGE", "coding_session", "swe_run"]

MEDIAN_AGE = 3.0
"""The median age, in calls, of what the next action reuses."""
AGE_SPREAD = 2.3
"""The log-sd of that age: a long tail, as in real sessions (in the shared Claude Code and
mini-swe-agent transcripts a tenth of the references reuse a string last shown 16-27 tool results
earlier)."""

SWE_SYSTEM = (
    "You are a helpful assistant that can interact with a computer shell to solve programming "
    "tasks. Run one bash command per call; the repository is checked out in /testbed. "
)
CODE_SYSTEM = (
    "You are an interactive coding agent. Use Read, Edit, Grep, Glob and Bash to work in the "
    "user's repository; read a file before editing it; run the tests after every change. "
)


def swe_run(seed: int = 0, *, n_calls: int | None = None) -> Messages:
    """A SWE-bench-like run: one issue, 30-120 bash calls (``n_calls`` to fix it).

    Args:
        seed: the same seed always gives the same run.
        n_calls: tool calls in the run; default drawn from 30-120 by the seed.
    """
    rng = random.Random(f"swe:{seed}")
    calls = n_calls if n_calls is not None else rng.randint(30, 120)
    agent = _Agent(rng, Repo.build(rng, modules=rng.randint(12, 30)), bash=True)
    task = agent.repo.task(rng)
    agent.start(SWE_SYSTEM * rng.randint(4, 10), task)
    agent.work(calls)
    agent.finish("I fixed the bug and the tests pass; submitting the patch.")
    return agent.messages


def coding_session(n_calls: int, *, seed: int = 0) -> Messages:
    """A long interactive coding session of ``n_calls`` tool calls, a new request every 40-120.

    Args:
        n_calls: tool calls in the session.
        seed: the same seed always gives the same session.
    """
    rng = random.Random(f"code:{n_calls}:{seed}")
    agent = _Agent(rng, Repo.build(rng, modules=rng.randint(30, 80)), bash=False)
    agent.start(CODE_SYSTEM * rng.randint(20, 80), agent.repo.task(rng))
    done = 0
    while done < n_calls:
        turn = min(rng.randint(40, 120), n_calls - done)
        agent.work(turn)
        done += turn
        if done < n_calls:
            agent.finish(f"Done with that part: {agent.recall('symbol')} now behaves.")
            agent.ask(agent.repo.task(rng))
    agent.finish("All requested changes are in and the test suite passes.")
    return agent.messages


class _Agent:
    """Writes the transcript: each call picks an action, reuses what it saw, shows new things."""

    def __init__(self, rng: random.Random, repo: Repo, *, bash: bool) -> None:
        self.rng, self.repo, self.bash = rng, repo, bash
        self.messages: Messages = []
        self.seen = Seen(rng, MEDIAN_AGE, AGE_SPREAD)
        self.calls = 0

    def start(self, system: str, task: str) -> None:
        self.messages += [{"role": "system", "content": system}, {"role": "user", "content": task}]

    def ask(self, task: str) -> None:
        self.messages.append({"role": "user", "content": task})

    def finish(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})

    def recall(self, kind: str) -> str:
        return self.seen.pick(kind, self.calls) or self.repo.any(self.rng, kind)

    def work(self, calls: int) -> None:
        for _ in range(calls):
            self.calls += 1
            name, args, result = self._act()
            self._append(name, args, result)

    def _act(self) -> tuple[str, dict[str, Any], str]:
        kind = self.rng.choices(_ACTIONS, _WEIGHTS)[0]
        if kind == "list" or not self.seen.has("path"):
            return self._list()
        return getattr(self, f"_{kind}")()  # type: ignore[no-any-return]

    def _append(self, name: str, args: dict[str, Any], result: str) -> None:
        call_id = f"call_{self.calls:05d}"
        fn = {"name": name, "arguments": json.dumps(args)}
        message: dict[str, Any] = {"role": "assistant", "content": self._thought()}
        message["tool_calls"] = [{"id": call_id, "type": "function", "function": fn}]
        self.messages.append(message)
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": result})

    def _thought(self) -> str | None:
        if self.rng.random() < 0.4:
            return None
        things = [self.recall(self.rng.choice(("symbol", "path", "line"))) for _ in range(2)]
        return self.rng.choice(_THOUGHTS).format(*things)

    def _tool(self, bash: str, name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return ("bash", {"command": bash}) if self.bash else (name, args)

    def _list(self) -> tuple[str, dict[str, Any], str]:
        folder = self.repo.folder(self.rng)
        paths = self.repo.under(folder)
        self.seen.add("path", paths, self.calls)
        name, args = self._tool(f"ls -la {folder}/*", "Glob", {"pattern": f"{folder}/**"})
        if not self.bash:
            return name, args, "\n".join(paths)
        sizes = [sum(len(line) + 1 for line in self.repo.files[path]) for path in paths]
        rows = [
            f"-rw-r--r-- 1 root root {n:>6} May  6  2025 {p}"
            for p, n in zip(paths, sizes, strict=True)
        ]
        return name, args, self._out("\n".join(rows))

    def _grep(self) -> tuple[str, dict[str, Any], str]:
        symbol = self.recall("symbol")
        hits = self.repo.grep(symbol, self.rng)
        for path, number, line in hits:
            self.seen.add("path", [path], self.calls)
            self.seen.add("line", [f"{path}:{number}"], self.calls)
            self.seen.add("symbol", self.repo.names_in(line), self.calls)
        text = "\n".join(f"{p}:{n}:{line}" for p, n, line in hits) or "(no matches)"
        name, args = self._tool(f"grep -rn '{symbol}' .", "Grep", {"pattern": symbol})
        return name, args, self._out(text)

    def _read(self) -> tuple[str, dict[str, Any], str]:
        path = self.recall("path")
        lines = self.repo.files[path]
        start = self.rng.randrange(max(1, len(lines) - 30))
        end = min(len(lines), start + self.rng.randint(40, 200))
        if not self.bash and self.rng.random() < 0.4:
            start, end = 0, len(lines)  # Read without a range: the whole file
        self.seen.add("read", [path], self.calls)
        for number in range(start, end):
            self.seen.add("symbol", self.repo.names_in(lines[number]), self.calls)
            self.seen.add("code", [f"{path}\0{number}"], self.calls)
        text = "\n".join(f"{n + 1:6}\t{lines[n]}" for n in range(start, end))
        bash = f"sed -n '{start + 1},{end}p' {path}"
        name, args = self._tool(bash, "Read", {"file_path": path, "offset": start + 1})
        return name, args, self._out(text)

    def _edit(self) -> tuple[str, dict[str, Any], str]:
        where = self.seen.pick("code", self.calls)
        if where is None:
            return self._read()
        path, _, number = where.partition("\0")
        old, new = self.repo.edit(path, int(number), self.rng)
        args = {"file_path": path, "old_string": old, "new_string": new}
        script = f"python - <<'EOF'\nimport pathlib\np = pathlib.Path({path!r})\n"
        script += f"p.write_text(p.read_text().replace({old!r}, {new!r}))\nEOF"
        name, args = self._tool(script, "Edit", args)
        around = self.repo.files[path][max(0, int(number) - 4) : int(number) + 5]
        text = f"The file {path} has been edited. A snippet of the result:\n" + "\n".join(around)
        return name, args, self._out(text if not self.bash else "")

    def _test(self) -> tuple[str, dict[str, Any], str]:
        target = self.recall("test")
        report, failures = self.repo.test_output(target, self.rng)
        for test_id, path, number, symbol in failures:
            self.seen.add("test", [test_id], self.calls)
            self.seen.add("line", [f"{path}:{number}"], self.calls)
            self.seen.add("symbol", [symbol], self.calls)
        command = f"python -m pytest {target} -x -q"
        name, args = self._tool(command, "Bash", {"command": command})
        return name, args, self._out(report)

    def _out(self, text: str) -> str:
        if not self.bash:
            return text
        return f"<returncode>0</returncode>\n<output>\n{text}\n</output>"


_ACTIONS = ("list", "grep", "read", "read", "edit", "test")
_WEIGHTS = (1, 3, 3, 2, 3, 2)
_THOUGHTS = (
    "The failure comes from {0}; {1} is where it is called.",
    "Let me look at {0} next, then check {1}.",
    "So {0} is wrong: {1} passes the value through unchanged.",
    "Now that {0} is fixed, run the tests that cover {1}.",
)
