"""The demo's scripted agent: the plan of a coding session over the installed ctxmw package.

The plan is what a coding agent does on a series of small tasks, each over one module: it
greps for a name, reads the module and a neighbour (numbered lines), runs the module's tests,
reads the failing function, edits it, and runs the tests again; it also edits lines it read
in earlier tasks, and opens a file at a line a grep found several tasks before. The plan is
made by running the tools in order on a tool box of its own, so every quote is what that read
really showed.

Each step is one model response (one tool call, or several at once). A step that takes text
from an earlier result names it in its :class:`Need` list; the agent
(:mod:`ctxmw.demo._agent`) checks its prompt for that text before it acts, and fetches it back
when the prompt no longer shows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ctxmw.demo._tools import EDIT_MARK, ToolBox, failing_function, functions, numbered

__all__ = ["Call", "Need", "PlanStep", "make_plan"]

Call = tuple[str, dict[str, object]]
"""One tool call: (tool name, arguments)."""

_WINDOW = 120  # lines per read, as agents page a file
_BLOCK = 3  # lines an edit quotes
_FAR = 4  # tasks back: the earlier reads an edit quotes, the earlier grep a fix follows


@dataclass(frozen=True, slots=True)
class Need:
    """Text a step takes from an earlier tool result, and how the agent gets it back.

    Attributes:
        text: the strings the step copies (lines as the result showed them).
        source: the call id of the result they come from.
        again: the tool call that shows them again (the same read or search).
        readback: ``ctxmw_expand``'s arguments besides the handle, for the same text.
    """

    text: tuple[str, ...]
    source: str
    again: Call
    readback: dict[str, object]


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One model response: the tool calls it makes, and the text they take from earlier."""

    calls: tuple[Call, ...]
    needs: tuple[Need, ...] = field(default=())


@dataclass(slots=True)
class _Read:
    id: str
    path: str
    lines: list[tuple[int, str]]


@dataclass(slots=True)
class _Planner:
    box: ToolBox
    steps: list[PlanStep] = field(default_factory=list)
    made: int = 0
    reads: list[list[_Read]] = field(default_factory=list)  # per task
    greps: list[list[tuple[str, Call, str]]] = field(default_factory=list)  # per task

    def step(self, *calls: Call, needs: tuple[Need, ...] = ()) -> list[str]:
        """Add one step; run its calls on the planner's tool box; returns their outputs."""
        k = len(self.steps)
        self.steps.append(PlanStep(calls, needs))
        self.made += len(calls)
        outputs = [str(getattr(self.box, name)(**args)) for name, args in calls]
        for j, ((name, args), out) in enumerate(zip(calls, outputs, strict=True)):
            if name == "read_file":
                self.reads[-1].append(_read(f"call_{k:04d}_{j}", str(args["path"]), out))
            elif name == "grep":
                self.greps[-1].append((f"call_{k:04d}_{j}", (name, args), out))
        return outputs

    def edit(self, read: _Read, near: int | None = None) -> None:
        """Edit lines that ``read`` showed (the block nearest line ``near``, by default its
        middle), quoting them."""
        current = self.box.text_lines(read.path)
        middle = read.lines[len(read.lines) // 2][0] if read.lines else 0
        block = _block(read, current, middle if near is None else near)
        if block is None:
            return
        old = "\n".join(text for _, text in block)
        new = "\n".join([block[0][1] + EDIT_MARK, *(text for _, text in block[1:])])
        first, last = block[0][0], block[-1][0]
        need = Need(
            tuple(numbered(n, text) for n, text in block),
            read.id,
            ("read_file", {"path": read.path, "start": max(1, first - 10), "lines": 40}),
            {"start": first, "end": last},
        )
        self.step(("edit_file", {"path": read.path, "old": old, "new": new}), needs=(need,))

    def follow(self, grep: tuple[str, Call, str], avoid: str) -> None:
        """Open a file at a line an earlier grep found, and edit the function there."""
        hits = [h.split(":", 2) for h in grep[2].splitlines() if h.count(":") >= 2]
        hits = [h for h in hits if h[0] != avoid and h[1].isdigit()]
        if not hits:
            return
        path, line, _ = hits[len(hits) // 2]
        text = f"{path}:{line}:"
        need = Need((text,), grep[0], grep[1], {"pattern": text})
        n = int(line)
        self.step(("read_file", {"path": path, "start": max(1, n - 5), "lines": 40}), needs=(need,))
        self.edit(self.reads[-1][-1], near=n)


def _read(call_id: str, path: str, output: str) -> _Read:
    lines = []
    for row in output.splitlines()[1:]:
        number, _, text = row.partition("→")
        lines.append((int(number), text))
    return _Read(call_id, path, lines)


def _block(read: _Read, current: list[str], near: int) -> list[tuple[int, str]] | None:
    """Lines of ``read`` an edit can quote: non-blank, unedited, still as read, unique."""
    text = "\n".join(current)
    fits = []
    for i in range(len(read.lines) - _BLOCK + 1):
        block = read.lines[i : i + _BLOCK]
        if not all(t.strip() and EDIT_MARK not in t and current[n - 1] == t for n, t in block):
            continue
        if len(block[0][1].strip()) >= 20 and text.count("\n".join(t for _, t in block)) == 1:
            fits.append(block)
    if not fits:
        return None
    return min(fits, key=lambda b: abs(b[0][0] - near))


def make_plan(root: Path, calls: int) -> list[PlanStep]:
    """A deterministic plan of about ``calls`` tool calls over the modules under ``root``."""
    box = ToolBox(root)
    files = [
        str(p.relative_to(root))
        for p in sorted(root.rglob("*.py"))
        if "__pycache__" not in p.parts
        and len(functions(box.text_lines(str(p.relative_to(root))))) > 3
    ]
    planner = _Planner(box)
    planner.step(("list_files", {"directory": "."}))
    task = 0
    while planner.made < calls:
        _task(planner, files, task)
        task += 1
    return planner.steps


def _task(planner: _Planner, files: list[str], t: int) -> None:
    """One task: find, read, test, fix, test again; and the edits that reach back."""
    planner.reads.append([])
    planner.greps.append([])
    focus, other = files[(t * 7) % len(files)], files[(t * 7 + 3) % len(files)]
    names = [name for name, _, _ in functions(planner.box.text_lines(focus))]
    folder = str(Path(other).parent)
    if t % 3 == 0 and str(Path(focus).parent) != ".":
        planner.step(("list_files", {"directory": str(Path(focus).parent)}))
    planner.step(("grep", {"pattern": rf"\b{names[t % len(names)]}\b", "path": "."}))
    planner.step(("read_file", {"path": focus, "start": 1}))
    start = 1 + (t // len(files)) * _WINDOW
    planner.step(
        ("read_file", {"path": other, "start": start}),
        ("grep", {"pattern": r"^class \w+", "path": folder}),
    )
    planner.step(("run_tests", {"path": focus}))
    failing = failing_function(focus, planner.box.text_lines(focus))
    line = next(
        (s for name, s, _ in functions(planner.box.text_lines(focus)) if name == failing), 0
    )
    if line:
        planner.step(("read_file", {"path": focus, "start": max(1, line - 10), "lines": 60}))
    planner.step(("grep", {"pattern": r"raise \w+", "path": folder}))
    planner.step(("read_file", {"path": files[(t * 11 + 5) % len(files)], "start": 1}))
    if line:
        planner.edit(planner.reads[-1][-2], near=line)
        planner.step(("run_tests", {"path": focus}))
    planner.edit(planner.reads[-1][0])
    if t >= _FAR:
        planner.edit(planner.reads[t - _FAR][1])
        planner.follow(
            planner.greps[t - _FAR + 1][0], avoid=files[((t - _FAR + 1) * 7) % len(files)]
        )
