"""Python callables as tools: an OpenAI tool schema from the signature and the Google docstring.

A tool's name is the function's ``__name__``; its description is the docstring's text before the
first section; each parameter's description comes from the ``Args:`` section and its JSON schema
from the annotation (pydantic). Arguments the model sends are validated against the same model
before the function runs.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from ctxmw.errors import UsageError

__all__ = ["Tool", "ToolSet", "parse_docstring", "tool_from_callable"]

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns?|Yields?|Raises|Examples?|Notes?)\s*:")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_ARG_SECTIONS = ("Args", "Arguments", "Parameters")
_NAME_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class Tool:
    """A Python callable the loop can run.

    Attributes:
        name: the function name the model calls.
        fn: the callable (sync or async).
        arguments: the pydantic model that validates the model's arguments.
        schema: the OpenAI tool dict sent to the model.
    """

    name: str
    fn: Callable[..., Any]
    arguments: type[BaseModel]
    schema: dict[str, Any]

    @property
    def is_async(self) -> bool:
        """Whether calling the tool returns a coroutine (run in the loop, not in a thread)."""
        call = getattr(self.fn, "__call__", None)  # noqa: B004 - async callable objects count too
        return inspect.iscoroutinefunction(self.fn) or inspect.iscoroutinefunction(call)


@dataclass(slots=True)
class ToolSet:
    """The ``tools=`` argument, split into what the model sees and what the loop can run.

    Attributes:
        schemas: every tool as an OpenAI tool dict, in the order given.
        executable: Python tools by name.
        declared: names of dict tools without a Python implementation (answered by the caller).
    """

    schemas: list[dict[str, Any]] = field(default_factory=list)
    executable: dict[str, Tool] = field(default_factory=dict)
    declared: set[str] = field(default_factory=set)

    @classmethod
    def build(cls, tools: Sequence[Mapping[str, Any] | Callable[..., Any]] | None) -> ToolSet:
        """Split ``tools``; dicts pass through unchanged, callables get a generated schema.

        Raises:
            UsageError: an item is neither, or two tools share a name.
        """
        out = cls()
        for item in tools or ():
            if isinstance(item, Mapping):
                out._add_name(_dict_tool_name(item))
                out.schemas.append(dict(item))
            elif callable(item):
                tool = tool_from_callable(item)
                out._add_name(tool.name)
                out.executable[tool.name] = tool
                out.schemas.append(tool.schema)
            else:
                raise UsageError(
                    f"tools item {item!r} is neither an OpenAI tool dict nor a Python callable."
                )
        out.declared -= set(out.executable)
        return out

    def _add_name(self, name: str) -> None:
        if name in self.declared or name in self.executable:
            raise UsageError(f"Two tools are named {name!r}; tool names must be unique.")
        self.declared.add(name)


def tool_from_callable(fn: Callable[..., Any]) -> Tool:
    """Describe ``fn`` as a tool.

    Raises:
        UsageError: the name is not a valid tool name, or the signature has ``*args``/``**kw``.
    """
    name = getattr(fn, "__name__", type(fn).__name__)
    if not _NAME_OK.match(name):
        raise UsageError(
            f"Tool name {name!r} is invalid: use 1-64 letters, digits, '_' or '-' "
            "(define a named function rather than a lambda)."
        )
    summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
    model = _arguments_model(name, fn, arg_docs)
    parameters = _clean_schema(model.model_json_schema())
    function: dict[str, Any] = {"name": name}
    if summary:
        function["description"] = summary
    function["parameters"] = parameters
    return Tool(name, fn, model, {"type": "function", "function": function})


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and its ``Args:`` entries."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    base: int | None = None  # indent of the entries in the Args section
    for line in doc.splitlines():
        stripped = line.strip()
        if header := _SECTION.match(line):
            section, current, base = header.group(1), None, None
        elif section is None:
            summary.append(stripped)
        elif section in _ARG_SECTIONS and stripped:
            indent = len(line) - len(line.lstrip())
            entry = _ARG_LINE.match(stripped)
            if entry and (base is None or indent <= base):
                base, current = indent, entry.group(1).lstrip("*")
                args[current] = entry.group(2).strip()
            elif current is not None:  # a continuation line of the current entry
                args[current] = f"{args[current]} {stripped}".strip()
    return "\n".join(summary).strip(), args


def _arguments_model(name: str, fn: Callable[..., Any], docs: dict[str, str]) -> type[BaseModel]:
    try:
        signature = inspect.signature(fn)
        hints = _hints(fn)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"Cannot read the signature of tool {name!r}: {exc}") from exc
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UsageError(
                f"Tool {name!r} takes *{param.name} or **{param.name}; a tool's parameters "
                "must be named so that their schema can be generated."
            )
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, Field(default, description=docs.get(param.name)))
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    model: type[BaseModel] = create_model(f"{name}_arguments", __config__=config, **fields)
    return model


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__
    return dict(inspect.get_annotations(target, eval_str=True))


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema


def _dict_tool_name(tool: Mapping[str, Any]) -> str:
    function = tool.get("function")
    name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
    if not isinstance(name, str) or not name:
        raise UsageError(
            f"Tool dict {dict(tool)!r} has no function name; expected "
            "{'type': 'function', 'function': {'name': ..., 'parameters': {...}}}."
        )
    return name
