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
from ctxmw._chain import prepare_prompt
from ctxmw._compact import shorten
from ctxmw._registry import StrategyInfo, list_strategies, register_strategy
from ctxmw._validate import validate
from ctxmw._version import __version__
from ctxmw._wrapper import acompletion
from ctxmw.errors import (
    Aborted,
    CtxmwError,
    CtxmwRuntimeError,
    InvalidTranscriptError,
    MaxRoundsExceeded,
    SaveFileBusy,
    SettingsError,
    StrategyError,
    UnknownStrategyError,
    UsageError,
)
from ctxmw.session import Session
from ctxmw.settings import Settings
from ctxmw.types import Message, Messages, Strategy, StrategyContext

__all__ = [
    "Aborted",
    "CtxmwError",
    "CtxmwRuntimeError",
    "InvalidTranscriptError",
    "MaxRoundsExceeded",
    "Message",
    "Messages",
    "SaveFileBusy",
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
    "inbox",
    "list_strategies",
    "prepare_prompt",
    "register_strategy",
    "shorten",
    "validate",
]
