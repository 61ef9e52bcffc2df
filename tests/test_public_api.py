"""The public surface is pinned: adding or removing a name is a deliberate change."""

from __future__ import annotations

import ctxmw

PUBLIC = [
    "Aborted",
    "Assembly",
    "Budget",
    "CompactionLossError",
    "ContextOverflowError",
    "CtxmwError",
    "CtxmwRuntimeError",
    "InvalidTranscriptError",
    "MaxRoundsExceeded",
    "Message",
    "Messages",
    "SaveFileBusy",
    "Segment",
    "Session",
    "Settings",
    "SettingsError",
    "Strategy",
    "StrategyContext",
    "StrategyError",
    "StrategyInfo",
    "UnknownStrategyError",
    "UsageError",
    "__version__",
    "acompletion",
    "assemble",
    "budget",
    "compressor",
    "inbox",
    "list_strategies",
    "prepare_prompt",
    "register_strategy",
    "select_segments",
    "shorten",
    "validate",
]


def test_all_is_pinned_and_sorted() -> None:
    assert ctxmw.__all__ == PUBLIC
    assert sorted(ctxmw.__all__) == ctxmw.__all__


def test_every_public_name_exists() -> None:
    for name in ctxmw.__all__:
        assert hasattr(ctxmw, name), name


def test_error_tree() -> None:
    usage = [
        ctxmw.SettingsError,
        ctxmw.UnknownStrategyError,
        ctxmw.InvalidTranscriptError,
        ctxmw.ContextOverflowError,
    ]
    runtime = [
        ctxmw.StrategyError,
        ctxmw.MaxRoundsExceeded,
        ctxmw.SaveFileBusy,
        ctxmw.CompactionLossError,
    ]
    assert all(issubclass(e, ctxmw.UsageError) for e in usage)
    assert all(issubclass(e, ctxmw.CtxmwRuntimeError) for e in runtime)
    assert not issubclass(ctxmw.Aborted, ctxmw.CtxmwError)
