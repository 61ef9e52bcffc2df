"""Python callables as tools: schema from the signature and the Google docstring."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from ctxmw import UsageError
from ctxmw.runtime.tool_schema import ToolSet, parse_docstring, tool_from_callable


class Filter(BaseModel):
    field: str
    value: int


async def search(
    query: str, limit: int = 5, mode: Literal["fast", "deep"] = "fast", where: Filter | None = None
) -> list[str]:
    """Search the notes.

    Matches are ranked.

    Args:
        query: what to look for,
            possibly long.
        limit (int): at most this many hits.
        mode: how hard to look.
        where: an optional filter.

    Returns:
        The hits.
    """
    return []


def test_schema_from_signature_and_docstring() -> None:
    tool = tool_from_callable(search)
    function = tool.schema["function"]
    assert tool.schema["type"] == "function"
    assert function["name"] == "search"
    assert function["description"] == "Search the notes.\n\nMatches are ranked."
    params = function["parameters"]
    assert params["required"] == ["query"]
    assert params["additionalProperties"] is False
    assert params["properties"]["query"] == {
        "description": "what to look for, possibly long.",
        "type": "string",
    }
    assert params["properties"]["limit"] == {
        "default": 5,
        "description": "at most this many hits.",
        "type": "integer",
    }
    assert params["properties"]["mode"]["enum"] == ["fast", "deep"]
    assert "$defs" in params
    assert "Filter" in params["$defs"]
    assert tool.is_async


def test_docstring_sections_and_continuations() -> None:
    summary, args = parse_docstring(
        "Do it.\n\nArgs:\n    a: first\n        more\n    *rest: others\n\nRaises:\n    x: never"
    )
    assert summary == "Do it."
    assert args == {"a": "first more", "rest": "others"}


def test_a_callable_object_is_a_tool() -> None:
    class Counter:
        __name__ = "count"

        def __call__(self, n: int) -> int:
            """Count to n."""
            return n

    tool = tool_from_callable(Counter())
    assert tool.schema["function"]["parameters"]["properties"]["n"]["type"] == "integer"
    assert not tool.is_async


def test_toolset_splits_dicts_and_callables() -> None:
    lookup = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    tools = ToolSet.build([lookup, search])
    assert [t["function"]["name"] for t in tools.schemas] == ["lookup", "search"]
    assert tools.schemas[0] == lookup
    assert set(tools.executable) == {"search"}
    assert tools.declared == {"lookup"}


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([search, search], "Two tools are named 'search'"),
        ([lambda x: x], "define a named function"),
        ([{"type": "function", "function": {}}], "has no function name"),
        ([42], "neither an OpenAI tool dict nor a Python callable"),
    ],
)
def test_bad_tools_are_usage_errors(tools: list[Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        ToolSet.build(tools)


def test_variadic_parameters_are_refused() -> None:
    def anything(*args: Any) -> None:
        """Take anything."""

    with pytest.raises(UsageError, match=r"\*args"):
        tool_from_callable(anything)
