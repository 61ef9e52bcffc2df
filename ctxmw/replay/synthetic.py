"""A deterministic synthetic agent transcript, so anyone can reproduce published figures.

Tool outputs have lognormal sizes (most small, a few huge), a fifth of the model's responses make
parallel calls, about one call in twenty repeats an earlier one (same tool, same arguments), and
the text is word-like so tokenizers see realistic density.
"""

from __future__ import annotations

import json
import random

from ctxmw.types import Messages

__all__ = ["synthetic_transcript"]

_VOCABULARY = (
    "def return self value config path error result request token cache prompt message tool call "
    "agent test file line module import class async await data index offset limit status user "
    "model epoch window prefix budget record session strategy output input json list"
)
_TOOLS = ("read_file", "grep", "run_tests", "list_files", "http_get")


def synthetic_transcript(n_calls: int, *, seed: int = 0) -> Messages:
    """A transcript with exactly ``n_calls`` completed tool calls, ending with a final answer.

    Args:
        n_calls: number of completed tool calls.
        seed: the same seed always gives the same transcript.
    """
    rng = random.Random(seed)
    corpus = _corpus(rng)
    msgs: Messages = [
        {"role": "system", "content": "You are a coding agent. Use the tools to fix the bug."},
        {"role": "user", "content": "The test suite fails on the cache module; find and fix it."},
    ]
    made: list[tuple[str, str]] = []
    call_no = 0
    while call_no < n_calls:
        width = min(rng.choice((1, 1, 1, 1, 2, 2, 3)), n_calls - call_no)
        calls = []
        for _ in range(width):
            call_no += 1
            name, args = _pick_call(rng, corpus, made, call_no)
            made.append((name, args))
            fn = {"name": name, "arguments": args}
            calls.append({"id": f"call_{call_no:05d}", "type": "function", "function": fn})
        msgs.append({"role": "assistant", "content": _thought(rng, corpus), "tool_calls": calls})
        for tc in calls:
            msgs.append({"role": "tool", "tool_call_id": tc["id"], "content": _output(rng, corpus)})
    msgs.append({"role": "assistant", "content": "Fixed: the cache key ignored the model name."})
    return msgs


def _corpus(rng: random.Random) -> str:
    vocabulary = _VOCABULARY.split()
    words = [rng.choice(vocabulary) for _ in range(40_000)]
    lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
    return "\n".join(lines)


def _pick_call(
    rng: random.Random, corpus: str, made: list[tuple[str, str]], call_no: int
) -> tuple[str, str]:
    if made and rng.random() < 0.05:
        return rng.choice(made)
    name = rng.choice(_TOOLS)
    args = {"path": f"src/pkg/module_{rng.randrange(60)}.py", "query": f"q{call_no}"}
    if rng.random() < 0.2:
        start = rng.randrange(len(corpus) - 1000)
        args["patch"] = corpus[start : start + rng.randrange(200, 1000)]
    return name, json.dumps(args)


def _thought(rng: random.Random, corpus: str) -> str | None:
    if rng.random() < 0.7:
        return None
    start = rng.randrange(len(corpus) - 300)
    return corpus[start : start + rng.randrange(40, 300)]


def _output(rng: random.Random, corpus: str) -> str:
    size = int(min(rng.lognormvariate(6.8, 1.1), 60_000))
    start = rng.randrange(len(corpus) - size) if size < len(corpus) else 0
    return corpus[start : start + size]
