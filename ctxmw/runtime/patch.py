"""``ctxmw.patch_litellm()``: route ``litellm.acompletion`` through ctxmw for code that calls it.

Agent frameworks (openai-agents' ``LitellmModel``, google-adk's ``LiteLlm``, langchain-litellm's
``ChatLiteLLM``) call ``litellm.acompletion`` themselves. Patching it sends each of their calls
through :func:`ctxmw.acompletion` with the options given to ``patch_litellm`` (defaults for every
call), overridden by the call's own ``metadata={"ctxmw": {...}}`` or keyword arguments.

The patch keeps the original function and ctxmw calls it for the provider (never the patched
one: no recursion). Patching twice keeps one layer; :meth:`Patch.undo` puts the original back.
Modules that already copied the function (``from litellm import acompletion``, as google-adk
does once it has imported litellm) are patched too: any imported module whose ``acompletion``
is litellm's own gets the patched one, and gets the original back on ``undo()``.
``litellm.acompletion = ctxmw.acompletion`` also works: ctxmw then reaches the provider through
``litellm.main.acompletion`` (see :func:`ctxmw._litellm.default_completion`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from types import ModuleType, TracebackType
from typing import Any

from ctxmw._litellm import CompletionFn, load_litellm, real_acompletion
from ctxmw.runtime.options import split_options
from ctxmw.runtime.wrapper import acompletion
from ctxmw.types import StrategySpec

__all__ = ["Patch", "patch_litellm"]


class Patch:
    """The handle of one :func:`patch_litellm`: ``undo()``, or use it as a context manager.

    Attributes:
        defaults: the ctxmw options every patched call starts from.
    """

    def __init__(self, defaults: dict[str, Any], original: CompletionFn) -> None:
        self.defaults = defaults
        self._original = original
        self._active = False

    @property
    def active(self) -> bool:
        """Whether ``litellm.acompletion`` is this patch's function now."""
        current = getattr(load_litellm(), "acompletion", None)
        return self._active and getattr(current, "__self__", None) is self

    async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
        """What ``litellm.acompletion`` does while patched: ctxmw, then the original."""
        if args:  # litellm's signature: acompletion(model, messages=..., ...)
            kwargs = {**dict(zip(("model", "messages"), args, strict=False)), **kwargs}
        options, rest = split_options(kwargs)
        completion = rest.pop("completion", None) or self._original
        merged = {**self.defaults, **options}
        return await acompletion(completion=completion, **merged, **rest)

    def install(self) -> Patch:
        """Make ``litellm.acompletion`` (and the modules' copies of it) this patch's function."""
        for module in (load_litellm(), *_holding(self._original)):
            setattr(module, "acompletion", self.acompletion)  # noqa: B010 - a module attribute
        self._active = True
        return self

    def undo(self) -> None:
        """Put the original back: in litellm and in every module that copied the patched one
        (a framework that imports litellm lazily copies whatever it finds then). A no-op once
        done."""
        if not self._active:
            return
        for module in _holding(self):
            setattr(module, "acompletion", self._original)  # noqa: B010
        self._active = False

    def __enter__(self) -> Patch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.undo()


def _holding(target: object) -> list[ModuleType]:
    """Imported modules whose ``acompletion`` is ``target``, or a method bound to it."""
    found = []
    for module in list(sys.modules.values()):
        if not isinstance(module, ModuleType):
            continue
        current = getattr(module, "acompletion", None)
        if current is target or getattr(current, "__self__", None) is target:
            found.append(module)
    return found


def patch_litellm(
    *,
    prompt_strategies: StrategySpec = None,
    save_file: str | None = None,
    strategy_options: dict[str, Any] | None = None,
    settings: Any = None,
    max_rounds: int | None = None,
    session: str | None = None,
    on_call: Sequence[Callable[..., Any]] = (),
) -> Patch:
    """Route ``litellm.acompletion`` through :func:`ctxmw.acompletion`.

    Idempotent: patching again replaces the defaults of the patch in place (one layer, the
    original kept). Undo with the returned handle (``patch.undo()`` or ``with
    ctxmw.patch_litellm(...):``).

    Args:
        prompt_strategies, save_file, strategy_options, settings, max_rounds, session, on_call:
            defaults for every patched call (see :func:`ctxmw.acompletion`); a call's
            ``metadata={"ctxmw": {...}}`` or its own keyword arguments override them. The
            framework runs its tools itself, so there is no ``tools`` default.

    Returns:
        The :class:`Patch` handle.
    """
    given = {
        "prompt_strategies": prompt_strategies,
        "save_file": save_file,
        "strategy_options": strategy_options,
        "settings": settings,
        "max_rounds": max_rounds,
        "session": session,
        "on_call": list(on_call) or None,
    }
    defaults = {k: v for k, v in given.items() if v is not None}
    handle = getattr(getattr(load_litellm(), "acompletion", None), "__self__", None)
    if isinstance(handle, Patch) and handle.active:
        handle.defaults = defaults
        return handle
    return Patch(defaults, real_acompletion()).install()
