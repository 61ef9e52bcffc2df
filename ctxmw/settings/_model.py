"""The ``Settings`` class: every option, its default and its ``CTXMW_`` name (its checks:
:mod:`ctxmw.settings._checks`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

import ctxmw.settings._checks as _checks
from ctxmw.context.survival import DEFAULT_DURABLE_PATTERNS
from ctxmw.errors import SettingsError
from ctxmw.settings._checks import CACHE_RULES, ENV_PREFIX
from ctxmw.settings._economic import EconomicSettings

DEFAULT_STRATEGIES = ("shorten_tools_economic", "inbox", "cache_breakpoints")

DEFAULT_COMPACTION_NOTICE = (
    "[Context note from ctxmw] {reason}, older tool activity in this conversation was "
    "shortened: {compacted} messages are compacted (marked '[compacted: ...]': only part of "
    "a long text is kept) and {dropped} messages were removed. {recover} A shortened "
    "or removed result does not mean the tool never ran: it ran and its full result was seen at "
    "the time. Do not repeat a tool call only because an older result is no longer shown."
)
BustCause = Literal["tools", "system", "transcript", "strategy"]


class Settings(EconomicSettings):
    """Every ctxmw setting, with its default. Each key reads ``CTXMW_<KEY>`` from the environment.

    Raises:
        SettingsError: a value (argument or environment variable) is invalid; the message names
            the key, the variable, the value and what is allowed.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        validate_default=True,
        frozen=True,
        env_ignore_empty=True,  # CTXMW_X= means unset, for every setting
    )

    prompt_strategies: str | None = Field(
        default=None,
        description="Comma-separated strategy names used when a call passes none "
        "(default: shorten_tools_economic,inbox,cache_breakpoints).",
    )
    full_tool_calls: int = Field(
        0, ge=0, description="shorten_tools: newest call arguments kept full."
    )
    full_tool_outputs: int = Field(10, ge=0, description="shorten_tools: newest outputs kept full.")
    max_tool_calls: int = Field(40, ge=0, description="shorten_tools: calls kept at all.")
    max_tool_outputs: int | None = Field(
        None, ge=0, description="shorten_tools: outputs kept at all (default: max_tool_calls)."
    )
    max_tool_chars: int = Field(
        100_000, ge=0, description="shorten_tools: characters of tool traffic kept full."
    )
    shorten_tools_protect_current_turn: bool = Field(
        False, description="shorten_tools: keep every call after the newest user message full."
    )
    epoch_tool_call_threshold: int = Field(
        50, ge=0, description="Epoch strategies: completed calls before any compaction."
    )
    epoch_full_tool_calls: int = Field(
        20, ge=0, description="Epoch strategies: calls before the current epoch kept full."
    )
    epoch_compacted_tool_calls: int = Field(
        80, ge=0, description="Epoch strategies: calls kept compacted before the full window."
    )
    epoch_size: int = Field(20, description="Epoch strategies: calls per epoch (<= 0 disables).")
    epoch_increment_epochs_per_increase: int = Field(
        3, ge=0, description="Increment: epochs between periodic size increases (0: never)."
    )
    epoch_increment_size_increase: int = Field(
        10, ge=0, description="Increment: periodic epoch size increase."
    )
    epoch_increment_repeat_increase: int = Field(
        10, ge=0, description="Increment: epoch size increase when a call repeats."
    )
    epoch_increment_max_size: int = Field(
        60, description="Increment: largest epoch size (never below epoch_size)."
    )
    epoch_increment_compacted_growth_ratio: float = Field(
        2.0, description="Increment: extra compacted calls per call of epoch growth (< 0 -> 0)."
    )
    epoch_increment_max_compacted_tool_calls: int = Field(
        160, description="Increment: largest compacted window (never below the base window)."
    )
    short_string_length: int = Field(
        200, ge=0, description="Compacted argument strings keep about this many characters."
    )
    short_output_length: int = Field(
        400, ge=0, description="Compacted tool outputs keep about this many characters."
    )
    inbox_max_bytes: int = Field(
        1_048_576,
        ge=0,
        description="inbox: files larger than this are skipped with a warning and left in place.",
    )
    inbox_max_messages: int = Field(
        100,
        ge=1,
        description="inbox: messages delivered per model call at most; the rest wait, in order, "
        "for the next call.",
    )
    inbox_keep_delivered: int = Field(
        100,
        ge=0,
        description="inbox: delivered files kept in the removed folder (the newest; older ones "
        "are deleted as new ones arrive); 0 keeps none.",
    )
    inbox_persist: bool = Field(
        False,
        description="inbox: append delivered messages to the transcript (default: show them "
        "for one model call; the removed folder is the record).",
    )
    compaction_notice: str = Field(
        DEFAULT_COMPACTION_NOTICE,
        description="Text of the notice the shortening strategies insert; {compacted} and "
        "{dropped} are replaced by counts, {reason} by why (cost or the context window), "
        "{recover} by how to get the content back.",
    )

    cache_rule: str = Field(
        "auto",
        description="Telemetry: provider caching rule for expected cache reads: "
        + ", ".join(CACHE_RULES)
        + " (auto picks one from the model and api_base).",
    )

    telemetry: bool = Field(
        True,
        description="Record every model call (ledger beside the save_file, the 'ctxmw' logger, "
        "on_call hooks).",
    )
    default_ledger: bool = Field(
        True,
        description="Record calls that have no save_file in the default ledger (state_dir/"
        "calls.ledger.jsonl), which 'ctxmw stats' reads with no argument; false turns it off.",
    )
    state_dir: str | None = Field(
        None,
        description="ctxmw's per-user state folder, home of the default ledger (default: "
        "$XDG_STATE_HOME/ctxmw, else ~/.local/state/ctxmw).",
    )
    ledger_max_bytes: int = Field(
        16 * 1024 * 1024,
        ge=4096,
        description="The default ledger moves to calls.old.ledger.jsonl once it reaches this "
        "size (about twice this stays on disk).",
    )
    # --- Cache telemetry levers, alerts and export (issue 15) ----------------------------------
    prompt_cache_key: bool = Field(
        True,
        description="Send a stable per-conversation prompt_cache_key to providers that take "
        "one (OpenAI, Azure; litellm's supported params decide); a caller's own key wins.",
    )
    otel: bool = Field(
        False,
        description="Export a span and metrics per model call through the global OpenTelemetry "
        "providers (needs the 'otel' extra).",
    )
    alerts: bool = Field(True, description="Evaluate the alert rules after every call.")
    alert_window: int = Field(
        10, ge=1, description="Alerts: calls per window of the windowed rules."
    )
    alert_min_hit_rate: float = Field(
        0.5, ge=0, le=1, description="Alerts: low_hit_rate fires under this share read."
    )
    alert_max_drift: float = Field(
        0.1, ge=0, le=1, description="Alerts: drift fires over this reported/expected gap."
    )
    alert_write_fraction: float = Field(
        0.5, ge=0, le=1, description="Alerts: write_every_call fires over this share written."
    )
    alert_bust_causes: list[BustCause] = Field(
        ["tools", "system"],
        description="Alerts: bust causes that fire bust_<cause>; env: a JSON list.",
    )
    # --- end of the issue 15 block -------------------------------------------------------------
    max_rounds: int = Field(
        25, ge=1, description="Tool loop: model calls per turn before MaxRoundsExceeded."
    )
    tool_timeout: float = Field(
        60.0, gt=0, description="Tool loop: seconds one tool call may run before it is cut off."
    )

    # --- Context toolkit (issue 7): compact, summarize, budget, compressors -------------------
    compact_trigger: float = Field(
        0.75,
        gt=0,
        description="compact/summarize: fold history once the prompt uses this share of the "
        "input window (0.75 = the 'summarize' band).",
    )
    compact_keep_recent: int = Field(
        8,
        ge=1,
        description="compact/summarize: newest turns never folded (a turn is one message, or an "
        "assistant message with its tool results).",
    )
    compact_on_loss: Literal["raise", "fallback"] = Field(
        "fallback",
        description="compact: when a durable item would be lost, 'raise' CompactionLossError or "
        "'fallback' to the uncompacted prompt (logged).",
    )
    # NoDecode: the env value reaches _json_list, which names the variable when it is not JSON.
    durable_patterns: Annotated[list[str] | None, NoDecode] = Field(
        None,
        description="Regular expressions of durable items (env: a JSON list); default: DECISION/"
        "OPEN/ERROR lines, order ids, amounts, tracking numbers.",
    )
    summary_model: str = Field(
        "gpt-4o-mini",
        min_length=1,
        description="summarize: the (cheap) model that writes summaries.",
    )
    summary_mode: Literal["aligned", "cheap"] = Field(
        "aligned",
        description="summarize: 'aligned' sends the agent's own prompt plus one instruction to "
        "the agent's model (reads the prompt cache); 'cheap' sends the folded text alone to "
        "summary_model.",
    )
    summary_step: int = Field(
        20,
        ge=1,
        description="compact/summarize: the folded range advances in steps of this many "
        "messages, so the prompt prefix is byte-stable in between.",
    )
    context_window: int | None = Field(
        None,
        ge=1,
        description="Input window in tokens; default: litellm's max_input_tokens for the model, "
        "else 128000.",
    )
    output_reservation: int = Field(
        4096, ge=0, description="Tokens of the input window kept free for the model's answer."
    )
    # --- end of the context toolkit block ------------------------------------------------------

    # --- clear_tool_results (issue 6): LangChain's ClearToolUsesEdit / Anthropic's clear_tool_uses
    clear_tool_results_keep: int = Field(
        3, ge=0, description="clear_tool_results: newest tool results never cleared."
    )
    clear_tool_results_trigger: int = Field(
        100_000,
        ge=0,
        description="clear_tool_results: clear once the prompt exceeds this many tokens.",
    )
    clear_tool_results_exclude_tools: Annotated[list[str], NoDecode] = Field(
        [],
        description="clear_tool_results: tool names whose results are never cleared "
        "(env: a JSON list).",
    )
    clear_tool_results_placeholder: str = Field(
        "[cleared]", description="clear_tool_results: the text that replaces a cleared result."
    )
    clear_tool_results_clear_tool_inputs: bool = Field(
        False,
        description="clear_tool_results: also replace a cleared call's arguments with '{}'.",
    )
    # --- end of the clear_tool_results block ---------------------------------------------------

    # --- offload (issue 16): large tool results shrunk once, readable through ctxmw_expand ------
    offload_threshold: int = Field(
        2000,
        ge=1,
        description="offload: a tool result over this many tokens is replaced by a preview and "
        "a handle the first time it is sent.",
    )
    offload_preview: Literal["head", "tail"] = Field(
        "head",
        description="offload: the preview shows the result's first ('head') or last ('tail') "
        "characters; a tool with a registered compressor gets its compressed view instead.",
    )
    offload_preview_chars: int = Field(
        1500, ge=0, description="offload: characters of the result the preview shows."
    )
    readback_max_chars: int = Field(
        8000,
        ge=1,
        description="ctxmw_expand (read-back of compacted and offloaded results): the most "
        "characters one answer returns.",
    )
    # --- end of the offload block --------------------------------------------------------------

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise SettingsError(_checks.describe(exc, values, Settings.model_fields)) from exc

    @field_validator("prompt_strategies")
    @classmethod
    def _empty_is_unset(cls, value: str | None) -> str | None:
        return _checks.empty_is_unset(value)

    @field_validator("durable_patterns", "clear_tool_results_exclude_tools", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        return _checks.json_list(value)

    @field_validator("epoch_increment_compacted_growth_ratio")
    @classmethod
    def _clamp_ratio(cls, value: float) -> float:
        return _checks.clamp_ratio(value)

    @field_validator("compaction_notice")
    @classmethod
    def _check_notice(cls, value: str) -> str:
        return _checks.notice(value)

    @field_validator("cache_rule")
    @classmethod
    def _check_cache_rule(cls, value: str) -> str:
        return _checks.cache_rule(value)

    @field_validator("durable_patterns")
    @classmethod
    def _check_patterns(cls, value: list[str] | None) -> list[str] | None:
        return _checks.patterns(value)

    @property
    def resolved_durable_patterns(self) -> tuple[str, ...]:
        """``durable_patterns`` as a tuple, or the built-in defaults when unset."""
        if self.durable_patterns is None:
            return DEFAULT_DURABLE_PATTERNS
        return tuple(self.durable_patterns)

    @property
    def resolved_max_tool_outputs(self) -> int:
        """``max_tool_outputs``, or ``max_tool_calls`` when unset."""
        return self.max_tool_calls if self.max_tool_outputs is None else self.max_tool_outputs

    def with_overrides(self, overrides: Mapping[str, Any] | None) -> Settings:
        """A new Settings: these values, with ``overrides`` on top, validated again."""
        if not overrides:
            return self
        return Settings(**{**self.model_dump(), **overrides})
