"""ctxmw: prompt strategies between async agents and LiteLLM.

Before every model call, ctxmw applies a list of named prompt strategies to a copy of the
conversation: what the model sees is shortened in cache-stable epochs, while the stored
transcript keeps full fidelity.
"""

from __future__ import annotations

from ctxmw import (
    _offline,  # noqa: F401  - must run before anything imports litellm
    inbox,
)
from ctxmw import strategies as _builtin_strategies  # noqa: F401  - registers the built-ins
from ctxmw._version import __version__
from ctxmw.context.budget import Budget, budget
from ctxmw.context.compressors import compressor
from ctxmw.context.segments import Assembly, Segment, assemble, select_segments
from ctxmw.errors import (
    Aborted,
    CompactionLossError,
    ContextOverflowError,
    CtxmwError,
    CtxmwRuntimeError,
    InvalidSaveFileError,
    InvalidTranscriptError,
    MaxRoundsExceeded,
    SaveFileBusy,
    SaveFileWriteError,
    SettingsError,
    StrategyError,
    UnknownStrategyError,
    UsageError,
)
from ctxmw.messages.shorten import shorten
from ctxmw.messages.validate import validate
from ctxmw.runtime.patch import patch_litellm
from ctxmw.runtime.session import Session
from ctxmw.runtime.sync import completion
from ctxmw.runtime.wrapper import acompletion
from ctxmw.settings import Settings
from ctxmw.strategies._chain import prepare_prompt
from ctxmw.strategies._registry import StrategyInfo, list_strategies, register_strategy
from ctxmw.types import Message, Messages, Strategy, StrategyContext

__all__ = [
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
