"""The one door to litellm: the only module that imports it (a test scans the package for that).

Everything ctxmw asks litellm goes through here: the completion function, model info (window,
cache minimum, prices), the provider of a model name, token counts, costs (``cost_per_token``
knows tiered prices), stream reassembly, and the response objects the testing fake builds.
(A message as a plain dict needs no litellm: :mod:`ctxmw.messages.form`.)
Importing litellm costs seconds, so ``import ctxmw`` never does it; the first call here does,
through :func:`load_litellm`. ``ctxmw._offline`` already pinned the local cost map before any of
this runs.
"""

from __future__ import annotations

import contextlib
import functools
import io
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from ctxmw import _offline  # noqa: F401  - the cost-map variable must be set before litellm loads
from ctxmw.errors import UsageError

__all__ = [
    "CompletionFn",
    "MessageCount",
    "completion_cost",
    "cost_adjusted",
    "cost_per_token",
    "default_completion",
    "llm_provider",
    "load_litellm",
    "mapped_model_info",
    "message_counter",
    "model_info",
    "model_response",
    "price_map_version",
    "real_acompletion",
    "real_completion",
    "stream_chunk_builder",
    "stream_chunks",
    "supported_openai_params",
    "token_counter",
    "usage_object",
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


def real_completion() -> Callable[..., Any]:
    """litellm's synchronous ``completion`` even where ctxmw took its place (see
    :func:`real_acompletion`): ``litellm.main.completion`` once ``litellm.completion`` is ctxmw's.

    Raises:
        UsageError: ``litellm.main.completion`` was replaced by ctxmw's too.
    """
    litellm = load_litellm()
    fn: Callable[..., Any] = litellm.completion
    if not _is_ctxmw(fn):
        return fn
    fn = litellm.main.completion
    if _is_ctxmw(fn):
        raise UsageError(
            "litellm.main.completion was replaced by ctxmw's completion, so ctxmw cannot reach "
            "the provider. Use ctxmw.patch_litellm() (it keeps the original) instead of "
            "assigning litellm's functions."
        )
    return fn


def _is_ctxmw(fn: object) -> bool:
    module = getattr(fn, "__module__", None) or ""
    return module == "ctxmw" or module.startswith("ctxmw.")


def model_info(model: str, provider: str | None = None) -> dict[str, Any]:
    """litellm's map entry for ``model`` (window, cache minimum, prices), or ``{}`` if unmapped."""
    litellm = load_litellm()
    # litellm prints a provider list to stdout for unknown models; keep the caller's stdout clean.
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            return dict(litellm.get_model_info(model=model, custom_llm_provider=provider))
        except Exception:  # litellm raises bare Exception subclasses for unmapped models
            return {}


def llm_provider(
    model: str, custom_llm_provider: str | None = None, api_base: str | None = None
) -> tuple[str, str] | None:
    """``(model name without the provider, provider)`` as litellm routes it; None if it cannot."""
    try:
        base, provider, _, _ = load_litellm().get_llm_provider(
            model, custom_llm_provider=custom_llm_provider, api_base=api_base
        )
    except Exception:  # an unknown model or provider: the caller decides what that means
        return None
    return str(base), str(provider)


def supported_openai_params(model: str, provider: str) -> list[str]:
    """The OpenAI parameters litellm passes on for ``model`` at ``provider`` ([] if unknown)."""
    try:
        params = load_litellm().get_supported_openai_params(
            model=model, custom_llm_provider=provider
        )
    except Exception:  # an unknown model: nothing is known to be supported
        return []
    return list(params or ())


def token_counter(
    model: str,
    messages: Sequence[Mapping[str, Any]] | None = None,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    framing_only: bool = False,
    text_tokens: Callable[[str], int] | None = None,
) -> int:
    """``litellm.token_counter`` on ``messages`` (and ``tools``), with the reply primer.

    Args:
        model: picks the tokenizer and the framing (tokens per message, tool rendering).
        messages: the messages; ``[]`` counts only the request's fixed overhead.
        tools: the tool definitions sent with them.
        framing_only: count the messages without the request overhead (litellm's
            ``count_response_tokens``: no reply primer, no tools).
        text_tokens: counts a text instead of the model's tokenizer; litellm still frames the
            messages (per-message tokens, names, tool-call arguments, images, the tools block).
    """
    litellm = load_litellm()
    custom = None if text_tokens is None else _custom_tokenizer(text_tokens)
    return int(
        litellm.token_counter(
            model=model,
            messages=list(messages or []),
            tools=list(tools) if tools else None,
            count_response_tokens=framing_only,
            custom_tokenizer=custom,
        )
    )


class _TextTokenizer:
    """A text counter in the shape litellm 1.110 reads a custom tokenizer through."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count

    def encode_batch_fast(self, texts: list[str]) -> list[range]:
        # litellm takes len() of each encoding: a range of that length stands for the ids.
        return [range(max(self._count(text), 0)) for text in texts]


def _custom_tokenizer(count: Callable[[str], int]) -> dict[str, Any]:
    return {"type": "huggingface_tokenizer", "tokenizer": _TextTokenizer(count)}


def cost_per_token(
    model: str,
    *,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    provider: str | None = None,
    usage: Any = None,
) -> tuple[float, float]:
    """USD of the prompt and of the completion, as litellm prices them (tiered prices included).

    ``prompt_tokens`` includes the cache reads and writes, as providers report it. With
    ``usage`` (a litellm ``Usage``), the counts are read from it instead.
    """
    kwargs: dict[str, Any] = {"model": model, "custom_llm_provider": provider}
    if usage is not None:
        kwargs["usage_object"] = usage
    else:
        kwargs.update(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cache_read_input_tokens=cache_read_tokens,
            cache_creation_input_tokens=cache_write_tokens,
        )
    prompt, completion = load_litellm().cost_per_token(**kwargs)
    return float(prompt), float(completion)


def completion_cost(response: Any, model: str, provider: str | None = None) -> float:
    """USD of one completion response (``litellm.completion_cost``)."""
    return float(
        load_litellm().completion_cost(
            completion_response=response, model=model, custom_llm_provider=provider
        )
    )


def stream_chunk_builder(chunks: list[Any], messages: Sequence[Any] | None = None) -> Any:
    """The whole response rebuilt from a consumed stream's chunks (None if there were none)."""
    return load_litellm().stream_chunk_builder(chunks, messages=messages)


def usage_object(
    prompt_tokens: int,
    completion_tokens: int,
    *,
    cached_tokens: int = 0,
    cache_write_tokens: int | None = None,
) -> Any:
    """A ``litellm.Usage`` with ``prompt_tokens_details`` (cache reads and writes)."""
    litellm = load_litellm()
    from litellm.types.utils import PromptTokensDetailsWrapper

    details = PromptTokensDetailsWrapper(
        cached_tokens=cached_tokens, cache_write_tokens=cache_write_tokens
    )
    return litellm.Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
        prompt_tokens_details=details,
    )


def model_response(
    content: str | None, tool_calls: list[dict[str, Any]] | None, usage: Any, model: str
) -> Any:
    """A ``litellm.ModelResponse`` holding one assistant message."""
    litellm = load_litellm()
    from litellm.types.utils import Choices
    from litellm.types.utils import Message as LiteLLMMessage

    message = LiteLLMMessage(content=content, tool_calls=tool_calls)
    finish = "tool_calls" if tool_calls else "stop"
    choice = Choices(index=0, finish_reason=finish, message=message)
    extra = {"usage": usage} if usage is not None else {}
    return litellm.ModelResponse(model=model, choices=[choice], **extra)


def stream_chunks(response: Any) -> list[Any]:
    """``response`` as the two stream chunks a provider would send (content, then the finish)."""
    load_litellm()
    from litellm.types.utils import Delta, ModelResponseStream, StreamingChoices

    message = response.choices[0].message
    calls = [
        {"index": i, **tc.model_dump(exclude_none=True)}
        for i, tc in enumerate(message.tool_calls or [])
    ]
    delta = Delta(role="assistant", content=message.content, tool_calls=calls or None)
    first = ModelResponseStream(
        model=response.model, choices=[StreamingChoices(index=0, delta=delta)]
    )
    finish = StreamingChoices(
        index=0, delta=Delta(), finish_reason=response.choices[0].finish_reason
    )
    return [
        first,
        ModelResponseStream(model=response.model, choices=[finish], usage=response.usage),
    ]


MessageCount = Callable[[Mapping[str, Any]], int]
"""Counts one message's tokens, framing included, without the request overhead."""


def message_counter(model: str, text_tokens: Callable[[str], int] | None = None) -> MessageCount:
    """:func:`token_counter` of one message (``framing_only=True``), its setup done once.

    ``litellm.token_counter`` picks the tokenizer and the framing constants (tokens per message,
    per name) anew on every call, which costs more than counting a short message. The returned
    function counts with the setup made here, through the same litellm functions
    (``convert_list_message_to_dict``, then ``_count_messages``), so each count equals
    ``token_counter(model, [message], framing_only=True, text_tokens=text_tokens)``; it raises
    what that raises for a message litellm refuses. Where this litellm lacks those functions,
    the returned function is the plain per-call one.
    """
    litellm = load_litellm()
    try:
        from litellm.litellm_core_utils import token_counter as core
        from litellm.utils import convert_list_message_to_dict as as_dicts

        custom = None if text_tokens is None else _custom_tokenizer(text_tokens)
        params = core._MessageCountParams(model, custom)
        count_messages: Callable[..., int] = core._count_messages
    except (ImportError, AttributeError, TypeError):
        return functools.partial(_one_message, model, text_tokens)

    def count(message: Mapping[str, Any]) -> int:
        if litellm.disable_token_counter is True:
            return 0
        return int(count_messages(params, as_dicts([message]), False, None))

    return count


def _one_message(
    model: str, text_tokens: Callable[[str], int] | None, message: Mapping[str, Any]
) -> int:
    return token_counter(model, [message], framing_only=True, text_tokens=text_tokens)


def price_map_version() -> tuple[int, int]:
    """Changes when litellm's price map is replaced or gains entries (``register_model``)."""
    cost_map = load_litellm().model_cost
    return id(cost_map), len(cost_map)


def cost_adjusted() -> bool:
    """Whether litellm applies process-wide discounts or margins to every cost it computes."""
    litellm = load_litellm()
    return bool(getattr(litellm, "cost_discount_config", None)) or bool(
        getattr(litellm, "cost_margin_config", None)
    )


def mapped_model_info(model: str, provider: str | None = None) -> dict[str, Any]:
    """:func:`model_info` for a model litellm is known to map: without guarding stdout (litellm
    prints only for unmapped models), so a memoised entry costs microseconds."""
    try:
        info = load_litellm().get_model_info(model=model, custom_llm_provider=provider or None)
        return dict(info)
    except Exception:  # unmapped after all (a price map replaced since)
        return {}
