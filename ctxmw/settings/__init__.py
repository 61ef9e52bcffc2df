"""Settings: one pydantic-settings class, ``CTXMW_`` environment prefix, read at construction.

Precedence: explicit arguments (``strategy_options=``, a ``Settings`` object, keyword
arguments) beat ``CTXMW_*`` environment variables, which beat the defaults. Nothing is read at
import time. ``Settings()`` reads the environment every time it is built; :func:`resolve_settings`
(what every ``Session`` and ``acompletion`` call goes through) reads the ``CTXMW_*`` variables
at every call too, but builds a new object only when they, or the explicit values, differ from a
recent call's: validating every field costs more than the rest of a small call. A changed
variable is honoured by the next call.
"""

from __future__ import annotations

from ctxmw.settings._checks import CACHE_RULES, ENV_PREFIX
from ctxmw.settings._model import (
    DEFAULT_COMPACTION_NOTICE,
    DEFAULT_STRATEGIES,
    BustCause,
    Settings,
)
from ctxmw.settings._resolve import resolve_settings

__all__ = [
    "CACHE_RULES",
    "DEFAULT_COMPACTION_NOTICE",
    "DEFAULT_STRATEGIES",
    "ENV_PREFIX",
    "BustCause",
    "Settings",
    "resolve_settings",
]
