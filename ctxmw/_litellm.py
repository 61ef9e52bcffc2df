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
from ctxmw.types import Message

__all__ = ["CompletionFn", "default_completion", "load_litellm", "message_dict", "response_message"]

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
    """``litellm.acompletion``, imported on first use."""
    fn: CompletionFn = load_litellm().acompletion
    return fn


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


def model_info(model: str | None) -> dict[str, Any]:
    """litellm's model-map entry for ``model`` (prices, window, provider), or ``{}`` if unmapped.

    Quiet: litellm prints a provider list to stdout for unknown models; the caller's stdout is
    not litellm's.
    """
    if not model:
        return {}
    return dict(_model_info(model))


@functools.lru_cache(maxsize=256)
def _model_info(model: str) -> tuple[tuple[str, Any], ...]:
    import contextlib
    import io

    litellm = load_litellm()
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            return tuple(dict(litellm.get_model_info(model)).items())
        except Exception:  # litellm raises bare Exception subclasses for unmapped models
            return ()


def provider_of(model: str | None) -> str | None:
    """litellm's provider name for ``model`` (``anthropic``, ``openai``, ...), or None."""
    if not model:
        return None
    provider = model_info(model).get("litellm_provider")
    if isinstance(provider, str) and provider:
        return provider
    return model.split("/", 1)[0] if "/" in model else None
