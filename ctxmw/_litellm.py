"""The one door to litellm: imported lazily, kept quiet, and its responses turned into dicts.

Importing litellm costs seconds, so ``import ctxmw`` never does it; the first model call (or the
testing fake) does, through :func:`load_litellm`. ``ctxmw._offline`` already pinned the local
cost map before any of this runs.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Awaitable, Callable, Mapping
from types import ModuleType
from typing import Any

from ctxmw import _offline  # noqa: F401  - the cost-map variable must be set before litellm loads
from ctxmw.errors import UsageError
from ctxmw.types import Message

__all__ = [
    "CompletionFn",
    "default_completion",
    "load_litellm",
    "message_dict",
    "real_acompletion",
    "response_message",
]

CompletionFn = Callable[..., Awaitable[Any]]
"""The shape of ``litellm.acompletion``: keyword arguments in, a response (or a stream) out."""


def load_litellm() -> ModuleType:
    """Import litellm (once) and silence its debug banners (spec section 5)."""
    import litellm

    # The "Provider List" banner and friends go to stdout; an agent's stdout is not litellm's.
    litellm.suppress_debug_info = True
    _warm_up_once(litellm)
    return litellm


@functools.cache
def _warm_up_once(litellm: ModuleType) -> None:
    """Build litellm's response models now, with pydantic's ``ReadOnly`` warning silenced.

    pydantic completes some litellm models on first use and warns that a TypedDict field is
    ``ReadOnly``; under ``-W error`` (or pytest's ``filterwarnings = error``) that warning turns
    the first response litellm or the testing fake builds into a crash.
    """
    from litellm.types.utils import Choices, Delta, Message, ModelResponseStream, StreamingChoices

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*ReadOnly.*", category=UserWarning)
        litellm.ModelResponse(choices=[Choices(message=Message(content=""))])
        ModelResponseStream(choices=[StreamingChoices(delta=Delta(content=""))])


def default_completion() -> CompletionFn:
    """``litellm.acompletion``, imported on first use (litellm's own, never ctxmw's)."""
    return real_acompletion()


def real_acompletion() -> CompletionFn:
    """litellm's ``acompletion`` even where ctxmw took its place.

    ``ctxmw.patch_litellm()`` or ``litellm.acompletion = ctxmw.acompletion`` make the name
    ctxmw's; calling it from ctxmw would recurse forever, so ctxmw then uses the function litellm
    defines, ``litellm.main.acompletion``.

    Raises:
        UsageError: ``litellm.main.acompletion`` was replaced by ctxmw's too.
    """
    litellm = load_litellm()
    fn: CompletionFn = litellm.acompletion
    if not _is_ctxmw(fn):
        return fn
    fn = litellm.main.acompletion
    if _is_ctxmw(fn):
        raise UsageError(
            "litellm.main.acompletion was replaced by ctxmw's acompletion, so ctxmw cannot reach "
            "the provider. Use ctxmw.patch_litellm() (it keeps the original) instead of "
            "assigning litellm's functions."
        )
    return fn


def _is_ctxmw(fn: object) -> bool:
    module = getattr(fn, "__module__", None) or ""
    return module == "ctxmw" or module.startswith("ctxmw.")


def message_dict(message: Any) -> Message:
    """A message as a plain OpenAI-format dict, without losing anything it carries.

    Dicts pass through as they are (the same object). litellm/pydantic ``Message`` objects are
    dumped with every field that holds a value: ``tool_calls``, ``thinking_blocks``,
    ``provider_specific_fields``, ``reasoning_content``...; only ``None`` (no information) is left
    out, and a ``provider_specific_fields`` left empty by that is dropped too.

    Raises:
        TypeError: ``message`` is neither a mapping nor a pydantic model.
    """
    if isinstance(message, dict):
        return message
    if isinstance(message, Mapping):
        return dict(message)
    dump = getattr(message, "model_dump", None)
    if dump is None:
        raise TypeError(
            f"Cannot store {message!r} as a chat message: pass an OpenAI-format dict or a "
            "litellm Message."
        )
    data: dict[str, Any] = _without_none(dump())
    if data.get("provider_specific_fields") == {}:
        del data["provider_specific_fields"]
    return data


def response_message(response: Any) -> Message:
    """The assistant message of a completion response (its first choice), as a dict.

    Works on a litellm ``ModelResponse`` and on anything shaped like one
    (``response.choices[0].message``), which is all an injected completion function must return.
    """
    choices = getattr(response, "choices", None)
    if not choices:
        raise TypeError(
            f"The completion function returned {type(response).__name__} without choices; "
            "it must return a litellm ModelResponse (or an object with .choices[0].message)."
        )
    # A copy: a duck-typed response may hand out its own dict, which must stay untouched.
    message = dict(message_dict(choices[0].message))
    message.setdefault("role", "assistant")
    return message


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value
