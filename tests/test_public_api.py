"""The public surface is pinned: adding or removing a name is a deliberate change."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import ctxmw

PUBLIC = [
    "Aborted",
    "Assembly",
    "Budget",
    "CompactionLossError",
    "ContextOverflowError",
    "CtxmwError",
    "CtxmwRuntimeError",
    "InvalidSaveFileError",
    "InvalidTranscriptError",
    "MaxRoundsExceeded",
    "Message",
    "Messages",
    "SaveFileBusy",
    "SaveFileWriteError",
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
    "completion",
    "compressor",
    "inbox",
    "list_strategies",
    "patch_litellm",
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
        ctxmw.InvalidSaveFileError,
        ctxmw.ContextOverflowError,
    ]
    runtime = [
        ctxmw.StrategyError,
        ctxmw.MaxRoundsExceeded,
        ctxmw.SaveFileBusy,
        ctxmw.SaveFileWriteError,
        ctxmw.CompactionLossError,
    ]
    assert all(issubclass(e, ctxmw.UsageError) for e in usage)
    assert all(issubclass(e, ctxmw.CtxmwRuntimeError) for e in runtime)
    assert not issubclass(ctxmw.Aborted, ctxmw.CtxmwError)


def test_the_package_root_holds_at_most_twelve_modules() -> None:
    root = Path(ctxmw.__file__).parent
    assert len(list(root.glob("*.py"))) <= 12


def test_strategy_modules_are_not_shadowed_by_their_strategies() -> None:
    import types

    module = importlib.import_module("ctxmw.strategies.compact")
    assert isinstance(module, types.ModuleType)
    assert ctxmw.strategies.compact is module
    assert not isinstance(ctxmw.budget, types.ModuleType)
    assert importlib.util.find_spec("ctxmw.budget") is None
