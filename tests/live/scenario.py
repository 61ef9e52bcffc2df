"""A replayed tool session: a coding agent's 30 tool calls, fixed turn by turn.

Deterministic (a seeded generator): the same messages on every run but for a nonce at the very
start, which keeps a server's cache of an earlier run (llama.cpp also keeps old prompts in host
RAM and brings them back) from serving this one. The results read
like a repository's files, grep hits, listings and test output, about 600-1,100 characters each,
so with small epoch settings the whole session stays well inside a 4,096-token context.
"""

from __future__ import annotations

import json
import random
from typing import Any

from ctxmw.types import Messages

__all__ = ["CALLS", "TOOLS", "history_before_call", "scripted_session"]

CALLS = 30

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {arg: {"type": "string"}},
                "required": [arg],
            },
        },
    }
    for name, arg, description in (
        ("read_file", "path", "Read a file of the repository."),
        ("grep", "pattern", "Search the repository for a regular expression."),
        ("list_dir", "path", "List a directory."),
        ("run_tests", "selector", "Run pytest on a test selector."),
    )
]

_SYSTEM = (
    "You are a coding agent working in the repository shopcart. Use the tools to find the cause "
    "of the failing test, then explain the fix. Call one tool at a time."
)
_TASK = (
    "tests/test_cart.py::test_member_discount fails: AssertionError: assert 90.0 == 81.0. "
    "Members should get the 10% discount on top of the seasonal one. Find out why."
)
_MODULES = ("cart", "pricing", "discounts", "members", "tax", "inventory", "checkout", "config")
_WORDS = (
    "price",
    "total",
    "item",
    "member",
    "season",
    "rate",
    "amount",
    "order",
    "quantity",
    "discount",
    "cache",
    "rule",
    "basket",
    "coupon",
    "currency",
    "rounding",
    "ledger",
    "stock",
    "region",
    "vat",
    "code",
    "limit",
)


def scripted_session(nonce: str, seed: int = 5) -> Messages:
    """System, task, then ``CALLS`` assistant tool calls, each followed by its result."""
    rng = random.Random(seed)
    messages: Messages = [
        {"role": "system", "content": f"Run {nonce}. {_SYSTEM}"},
        {"role": "user", "content": _TASK},
    ]
    for number in range(1, CALLS + 1):
        name, arg, value, result = _call(rng, number)
        call_id = f"call_{number:02d}"
        arguments = json.dumps({arg: value})
        function = {"name": name, "arguments": arguments}
        tool_call = {"id": call_id, "type": "function", "function": function}
        messages.append({"role": "assistant", "content": None, "tool_calls": [tool_call]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return messages


def history_before_call(session: Messages, k: int) -> Messages:
    """What a stateless caller sends for call ``k`` (1-based): the first ``k - 1`` rounds."""
    return session[: 2 + 2 * (k - 1)]


def _call(rng: random.Random, number: int) -> tuple[str, str, str, str]:
    kind = number % 4
    module = _MODULES[number % len(_MODULES)]
    if kind == 0:
        selector = f"tests/test_{module}.py::test_{rng.choice(_WORDS)}_{number}"
        return "run_tests", "selector", selector, _test_output(rng, selector)
    if kind == 1:
        path = f"src/shopcart/{module}.py"
        return "read_file", "path", f"{path}#L{number * 20}", _source(rng, number)
    if kind == 2:
        pattern = rf"def .*{rng.choice(_WORDS)}_{number}"
        return "grep", "pattern", pattern, _grep(rng)
    path = f"src/shopcart/{module}/v{number}"
    return "list_dir", "path", path, _listing(rng)


def _identifier(rng: random.Random) -> str:
    return f"{rng.choice(_WORDS)}_{rng.choice(_WORDS)}"


def _code_line(rng: random.Random) -> str:
    a, b, c = _identifier(rng), _identifier(rng), rng.choice(_WORDS)
    return rng.choice(
        (
            f"def {a}(self, {c}: float) -> float:",
            f"    return round(self.{b} * {c}, 2)",
            f"    if {c} > self.{b}:",
            f"        {a} = {c} * (1 - self.{b})",
            f"    # {c}: applied after the {b} rule",
            f"{a.upper()} = {rng.randrange(2, 99)}",
        )
    )


def _source(rng: random.Random, number: int) -> str:
    start = number * 20
    return "\n".join(f"{start + i:4d}  {_code_line(rng)}" for i in range(rng.randrange(18, 26)))


def _grep(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randrange(11, 16)):
        module = rng.choice(_MODULES)
        lines.append(f"src/shopcart/{module}.py:{rng.randrange(1, 400)}:{_code_line(rng)}")
    return "\n".join(lines)


def _listing(rng: random.Random) -> str:
    rows = [f"{rng.randrange(200, 9000):6d}  {_identifier(rng)}.py" for _ in range(18)]
    return "total " + str(len(rows)) + "\n" + "\n".join(rows)


def _test_output(rng: random.Random, selector: str) -> str:
    trace = "\n".join(f"    {_code_line(rng)}" for _ in range(rng.randrange(9, 13)))
    return (
        "============================= test session starts ==============================\n"
        f"collected 1 item\n\n{selector} F\n\n"
        "=================================== FAILURES ===================================\n"
        f"{trace}\nE   AssertionError: assert {rng.randrange(50, 99)}.0 == "
        f"{rng.randrange(50, 99)}.0\n"
        "=========================== 1 failed in 0.12s ==========================="
    )
