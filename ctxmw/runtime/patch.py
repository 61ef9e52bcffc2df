"""``ctxmw.patch_litellm()``: route litellm's ``acompletion`` and ``completion`` through ctxmw.

Agent frameworks (openai-agents' ``LitellmModel``, google-adk's ``LiteLlm``, langchain-litellm's
``ChatLiteLLM``) call ``litellm.acompletion`` themselves; synchronous agents (mini-swe-agent,
smolagents, agno's ``Agent.run``) call ``litellm.completion``. Patching sends each of their calls
through :func:`ctxmw.acompletion` or its synchronous twin :func:`ctxmw.completion` with the
options given to ``patch_litellm`` (defaults for every call), overridden by the call's own
``metadata={"ctxmw": {...}}`` or keyword arguments.

The patch keeps the original functions and ctxmw calls them for the provider (never the patched
ones: no recursion). Patching twice keeps one layer; :meth:`Patch.undo` puts the originals back.
Modules that already copied a function (``from litellm import acompletion``, as google-adk
does once it has imported litellm) are patched too: any imported module whose ``acompletion``
(or ``completion``) is litellm's own gets the patched one, and gets the original back on
``undo()``. litellm's own modules are left alone: its ``acompletion`` calls the module-level
``completion`` of ``litellm.main`` internally, which must stay litellm's.
``litellm.acompletion = ctxmw.acompletion`` also works: ctxmw then reaches the provider through
``litellm.main.acompletion`` (see :func:`ctxmw._litellm.default_completion`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from types import ModuleType, TracebackType
from typing import Any

from ctxmw._litellm import load_litellm, real_acompletion, real_completion
from ctxmw.runtime.options import split_options
from ctxmw.runtime.sync import completion
from ctxmw.runtime.wrapper import acompletion
from ctxmw.types import StrategySpec

__all__ = ["Patch", "patch_litellm"]


class Patch:
    """The handle of one :func:`patch_litellm`: ``undo()``, or use it as a context manager.

    Attributes:
        defaults: the ctxmw options every patched call starts from.
    """

    def __init__(self, defaults: dict[str, Any], originals: dict[str, Callable[..., Any]]) -> None:
        self.defaults = defaults
        self._originals = originals  # by name: litellm's acompletion and completion
        self._active = False

    @property
    def active(self) -> bool:
        """Whether ``litellm.acompletion`` is this patch's function now."""
        current = getattr(load_litellm(), "acompletion", None)
        return self._active and getattr(current, "__self__", None) is self

    async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
        """What ``litellm.acompletion`` does while patched: ctxmw, then the original."""
        return await acompletion(**self._arguments("acompletion", args, kwargs))

    def completion(self, *args: Any, **kwargs: Any) -> Any:
        """What ``litellm.completion`` does while patched: ctxmw's sync twin, then the original
        (streams included: a :class:`~ctxmw.runtime.sync.SyncStream` of its chunks). With
        ``acompletion=True``, as litellm's, the coroutine of :meth:`acompletion`."""
        if kwargs.pop("acompletion", False):
            return self.acompletion(*args, **kwargs)
        return completion(**self._arguments("completion", args, kwargs))

    def _arguments(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if args:  # litellm's signature: (a)completion(model, messages=..., ...)
            kwargs = {**dict(zip(("model", "messages"), args, strict=False)), **kwargs}
        options, rest = split_options(kwargs)
        given = rest.pop("completion", None) or self.defaults.get("completion")
        return {**self.defaults, **options, **rest, "completion": given or self._originals[name]}

    def install(self) -> Patch:
        """Make litellm's functions (and the modules' copies of them) this patch's ones."""
        for name, original in self._originals.items():
            for module in (load_litellm(), *_holding(name, original)):
                setattr(module, name, getattr(self, name))
        self._active = True
        return self

    def undo(self) -> None:
        """Put the originals back: in litellm and in every module that copied a patched one
        (a framework that imports litellm lazily copies whatever it finds then). A no-op once
        done."""
        if not self._active:
            return
        for name, original in self._originals.items():
            for module in _holding(name, self):
                setattr(module, name, original)
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


def _holding(name: str, target: object) -> list[ModuleType]:
    """Imported modules, litellm's own aside, whose ``name`` is ``target`` or a method bound to
    it."""
    found = []
    for key, module in list(sys.modules.items()):
        if not isinstance(module, ModuleType) or key.startswith("litellm."):
            continue
        current = getattr(module, name, None)
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
    completion: Callable[..., Any] | None = None,
) -> Patch:
    """Route ``litellm.acompletion`` through :func:`ctxmw.acompletion`, and
    ``litellm.completion`` through :func:`ctxmw.completion`.

    Idempotent: patching again replaces the defaults of the patch in place (one layer, the
    original kept). Undo with the returned handle (``patch.undo()`` or ``with
    ctxmw.patch_litellm(...):``).

    Args:
        prompt_strategies, save_file, strategy_options, settings, max_rounds, session, on_call:
            defaults for every patched call (see :func:`ctxmw.acompletion`); a call's
            ``metadata={"ctxmw": {...}}`` or its own keyword arguments override them. The
            framework runs its tools itself, so there is no ``tools`` default.
        completion: the provider call every patched call makes instead of litellm's own
            (``ctxmw.testing.FakeCompletion``: an agent tried offline, no key, no network); a
            call's own ``completion=`` still wins.

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
        "completion": completion,
    }
    defaults = {k: v for k, v in given.items() if v is not None}
    handle = getattr(getattr(load_litellm(), "acompletion", None), "__self__", None)
    if isinstance(handle, Patch) and handle.active:
        handle.defaults = defaults
        return handle
    originals = {"acompletion": real_acompletion(), "completion": real_completion()}
    return Patch(defaults, originals).install()
