"""Memory still allocated after a ~20 MB transcript is prepared, recorded and dropped.

Not a test: run ``python benchmarks/bench_memory.py [--mb 20]``. tracemalloc measures what
Python still holds once every reference the caller had is gone (and ``gc.collect()`` ran),
against a baseline taken after a warm-up on a small transcript (imports, the tokenizer, litellm's
tables). Each path runs in a fresh process (so no path inherits another's caches), on the same
transcript:

- ``prepare_prompt``: one-off calls of the default strategy, ``clear_tool_results`` and
  ``compact`` (token counts, shortened results, durable items, call keys).
- ``Session``: the transcript resumed from a save_file, one ``ask()`` with the fake model:
  strategies, telemetry (prefix tracking, ledger), the transcript append.
- ``acompletion``: the same through the stateless wrapper with a save_file.

Uses only the public API, so the same script measures an older checkout
(``PYTHONPATH=/path/to/old python benchmarks/bench_memory.py``).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

import ctxmw
from ctxmw.testing import FakeCompletion, text

MODEL = "gpt-4o"
STRATEGIES = ("shorten_tools_epoch_increment", "clear_tool_results", "compact")


def transcript(megabytes: float) -> list[dict[str, Any]]:
    """A tool-calling session of about ``megabytes`` MB, every result and argument unique."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Read every file. DECISION: start with src/."},
    ]
    size, i = 0, 0
    while size < megabytes * 1_000_000:
        args = json.dumps({"path": f"src/file_{i}.py", "pattern": f"needle {i} " * 20})
        body = "".join(f"{i}:{line}: value {i * 7 + line} ORD-{i:05d}\n" for line in range(300))
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "read", "arguments": args},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": body})
        size += len(args) + len(body)
        i += 1
    return messages


async def prepare(messages: list[dict[str, Any]], folder: Path) -> None:
    for strategy in STRATEGIES:
        await ctxmw.prepare_prompt(messages, strategy, model=MODEL)


async def session(messages: list[dict[str, Any]], folder: Path) -> None:
    save_file = _save_file(messages, folder, "session")
    convo = ctxmw.Session(
        MODEL,
        save_file=save_file,
        prompt_strategies=",".join(STRATEGIES),
        completion=FakeCompletion(text("done")),
    )
    await convo.ask("Go on.")


async def stateless(messages: list[dict[str, Any]], folder: Path) -> None:
    save_file = folder / "stateless.jsonl"
    await ctxmw.acompletion(
        model=MODEL,
        messages=[*messages, {"role": "user", "content": "Go on."}],
        save_file=save_file,
        prompt_strategies=",".join(STRATEGIES),
        completion=FakeCompletion(text("done")),
    )


def _save_file(messages: list[dict[str, Any]], folder: Path, name: str) -> Path:
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    return path


def retained(run: Callable[[list[dict[str, Any]], Path], Awaitable[None]], mb: float) -> float:
    """MB still allocated after ``run`` on a fresh ~``mb`` MB transcript, once it is dropped."""
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(run, transcript(0.2), Path(tmp))  # warm-up: imports, tokenizer, tables
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    with tempfile.TemporaryDirectory() as tmp:
        messages = transcript(mb)
        anyio.run(run, messages, Path(tmp))
        del messages
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / 1e6


PATHS = {"prepare_prompt": prepare, "Session": session, "acompletion": stateless}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20.0, help="transcript size (default 20)")
    parser.add_argument("--only", choices=sorted(PATHS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:  # one path, in this (fresh) process: print the figure alone
        print(retained(PATHS[args.only], args.mb))
        return
    size = sum(len(json.dumps(m)) for m in transcript(args.mb)) / 1e6
    print(f"ctxmw from {Path(ctxmw.__file__).parent}; transcript {size:.1f} MB of JSON")
    print(f"{'path':<16} {'retained after drop':>20} {'retained / transcript':>22}")
    for name in PATHS:
        command = [sys.executable, __file__, "--mb", str(args.mb), "--only", name]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        mb = float(done.stdout.strip().splitlines()[-1])
        print(f"{name:<16} {mb:>17.1f} MB {mb / size:>22.2f}")


if __name__ == "__main__":
    main()
