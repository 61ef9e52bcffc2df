"""Running tool calls: concurrently, with a timeout, every failure an error text."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import anyio
import pytest

from ctxmw import Aborted
from ctxmw.runtime.tool_runner import run_tool_calls
from ctxmw.runtime.tool_schema import ToolSet

pytestmark = pytest.mark.anyio


def call(name: str, arguments: Any, id: str = "c1") -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id, "type": "function", "function": {"name": name, "arguments": raw}}


def add(a: int, b: int) -> int:
    """Add."""
    return a + b


async def test_results_come_back_in_call_order_with_their_ids() -> None:
    calls = [call("add", {"a": 1, "b": 2}, "x"), call("add", {"a": "3", "b": 4}, "y")]
    results = await run_tool_calls(calls, ToolSet.build([add]), 5)
    assert results == [
        {"role": "tool", "tool_call_id": "x", "content": "3"},
        {"role": "tool", "tool_call_id": "y", "content": "7"},
    ]


async def test_calls_of_one_response_run_concurrently() -> None:
    first_in, second_in = anyio.Event(), anyio.Event()

    async def first() -> str:
        """Wait for the second."""
        first_in.set()
        await second_in.wait()
        return "one"

    async def second() -> str:
        """Wait for the first."""
        second_in.set()
        await first_in.wait()
        return "two"

    # Run one after the other, each would wait for the other until the timeout.
    results = await run_tool_calls(
        [call("first", {}, "a"), call("second", {}, "b")], ToolSet.build([first, second]), 5
    )
    assert [r["content"] for r in results] == ["one", "two"]


async def test_sync_tools_run_in_a_worker_thread() -> None:
    def where() -> bool:
        """Report the thread."""
        return threading.current_thread() is threading.main_thread()

    results = await run_tool_calls([call("where", {})], ToolSet.build([where]), 5)
    assert results[0]["content"] == "false"


@pytest.mark.parametrize(
    ("the_call", "expected"),
    [
        (
            call("nope", {}),
            "Error: there is no tool named 'nope'. Available tools: add, boom, sleepy.",
        ),
        (
            call("add", "{not json"),
            "Error: invalid arguments for tool 'add': they are not valid JSON",
        ),
        (
            call("add", [1, 2]),
            "Error: invalid arguments for tool 'add': expected a JSON object, got list.",
        ),
        (call("add", {"a": 1}), "Error: invalid arguments for tool 'add': b: Field required."),
        (
            call("add", {"a": 1, "b": 2, "c": 3}),
            "Error: invalid arguments for tool 'add': c: Extra inputs",
        ),
        (call("boom", {}), "Error: tool 'boom' raised ValueError: kaboom"),
        (call("sleepy", {}), "Error: tool 'sleepy' did not finish within 0.05 s and was stopped."),
    ],
)
async def test_failures_become_error_texts(the_call: dict[str, Any], expected: str) -> None:
    def boom() -> None:
        """Fail."""
        raise ValueError("kaboom")

    async def sleepy() -> None:
        """Never finish."""
        await anyio.sleep_forever()

    results = await run_tool_calls([the_call], ToolSet.build([add, boom, sleepy]), 0.05)
    assert results[0]["content"].startswith(expected)


async def test_a_slow_sync_tool_is_abandoned_at_the_timeout() -> None:
    gate = threading.Event()

    def stuck() -> str:
        """Block."""
        gate.wait(5)
        return "late"

    results = await run_tool_calls([call("stuck", {})], ToolSet.build([stuck]), 0.05)
    gate.set()
    assert "did not finish" in results[0]["content"]


async def test_a_tool_own_timeout_error_is_not_mistaken_for_the_limit() -> None:
    def flaky() -> None:
        """Time out by itself."""
        raise TimeoutError("upstream")

    results = await run_tool_calls([call("flaky", {})], ToolSet.build([flaky]), 5)
    assert results[0]["content"] == "Error: tool 'flaky' raised TimeoutError: upstream"


async def test_aborted_stops_the_loop_and_cancels_the_other_calls() -> None:
    cancelled = anyio.Event()

    async def stop() -> None:
        """Abort."""
        raise Aborted("operator said stop")

    async def wait() -> None:
        """Wait."""
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    with pytest.raises(Aborted, match="operator said stop"):
        await run_tool_calls(
            [call("wait", {}, "w"), call("stop", {}, "s")], ToolSet.build([stop, wait]), 5
        )
    assert cancelled.is_set()


async def test_structured_results_are_json() -> None:
    def info() -> dict[str, Any]:
        """Info."""
        return {"ok": True, "items": [1, 2]}

    results = await run_tool_calls([call("info", "")], ToolSet.build([info]), 5)
    assert json.loads(results[0]["content"]) == {"ok": True, "items": [1, 2]}


HUNG_TOOL_AGENT = """
import threading, anyio, ctxmw
from ctxmw.testing import FakeCompletion, text, tool_calls

def hang() -> str:
    \"\"\"Never returns.\"\"\"
    threading.Event().wait()
    return "never"

fake = FakeCompletion(tool_calls(("hang", {})), text("gave up on it"))
session = ctxmw.Session("openai/gpt-4o-mini", tools=[hang], completion=fake,
                        settings={"tool_timeout": 0.2})
anyio.run(session.ask, "go")
print("answered", flush=True)
"""


def test_a_hung_sync_tool_does_not_keep_the_process_from_exiting() -> None:
    done = subprocess.run(
        [sys.executable, "-c", HUNG_TOOL_AGENT],
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard, not a timing assert: the process must exit at all
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "answered"), done.stderr
