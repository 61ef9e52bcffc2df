"""The settings of the default strategy, ``shorten_tools_economic``, and of read-back: a part
of :class:`~ctxmw.settings.Settings` (which reads them, with every other, from ``CTXMW_*``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode

import ctxmw.settings._checks as _checks


class EconomicSettings(BaseSettings):
    """The default strategy's tiers, its economics and read-back (see ``Settings``)."""

    cache_ttl: float | None = Field(
        None,
        gt=0,
        description="Seconds a provider keeps an unused prompt cache (default: per provider, see "
        "ctxmw.strategies.shorten_tools_economic); an idle gap longer than this makes the next "
        "call's cache cold.",
    )
    economic_full_tool_calls: int = Field(
        3,
        ge=0,
        description="shorten_tools_economic: calls before the boundary kept full (every newer "
        "call is full too).",
    )
    economic_compacted_tool_calls: int = Field(
        80,
        ge=0,
        description="shorten_tools_economic: calls kept compacted before the full window.",
    )
    economic_compacted_result_chars: int = Field(
        300,
        ge=0,
        description="shorten_tools_economic: characters of whole lines a compacted result keeps "
        "(the first line, errors, definitions, paths, identifiers; see ctxmw.messages.outline); "
        "0: its head and tail, short_output_length characters, like the other strategies.",
    )
    economic_whole_tools: Annotated[list[str], NoDecode] = Field(
        ["Task", "Agent"],
        description="shorten_tools_economic: tools whose results are reports the agent asked "
        "for (a subagent's answer): kept whole through the compacted tier, dropped with it "
        "(env: a JSON list).",
    )
    readback: bool = Field(
        True,
        description="shorten_tools_economic: a compacted result's header names a handle; every "
        "call declares ctxmw_expand and ctxmw answers it itself with any of its lines, read back "
        "from the conversation (false: compacted results cannot be read back).",
    )
    economic_break_even: float = Field(
        3.0,
        gt=0,
        description="shorten_tools_economic: move the boundary once the rent paid since the last "
        "move reaches this multiple of the rewrite cost (1.0: the classic ski-rental "
        "break-even; 3.0 moves less often, risks less against sending everything and keeps "
        "more results whole).",
    )
    economic_guard: float | None = Field(
        1.04,
        ge=1.0,
        description="shorten_tools_economic under breakpoint caching: a move waits while it "
        "would take the schedule's estimated running cost over this multiple of what sending "
        "everything would have cost so far: the bound on its estimated cost x none at every "
        "call point (None: no guard).",
    )
    economic_guard_automatic: float | None = Field(
        1.02,
        ge=1.0,
        description="shorten_tools_economic: economic_guard under automatic prefix caching "
        "(the openai, gemini and exact rules), where a move reads the head back and costs less.",
    )
    economic_head_mark: bool | None = Field(
        None,
        description="shorten_tools_economic under breakpoint caching: the client marks the end "
        "of the head, so a move reads the head back and the schedule prices it so (None: "
        "inferred, true when cache_breakpoints runs after it in the chain).",
    )

    @field_validator("economic_whole_tools", mode="before")
    @classmethod
    def _whole_tools_list(cls, value: Any) -> Any:
        return _checks.json_list(value)
