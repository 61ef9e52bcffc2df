"""A strategy's own model call (a summary) inside the proxy.

It goes to exactly the deployment of the request it serves: the same model, ``api_base`` and
credentials the router chose for that request, and the request's metadata, so the proxy's
spend logs bill it to the caller's key like any call. A strategy never picks another model
here (``summary_model`` is not used in the proxy, and no tenant may set it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxmw._litellm import real_acompletion

__all__ = ["DeploymentCall"]

# What belongs to the request being served, not to a new call (litellm makes its own).
_NOT_FORWARDED = frozenset(
    {"litellm_logging_obj", "litellm_call_id", "messages", "stream", "stream_options"}
)


@dataclass(frozen=True, slots=True)
class DeploymentCall:
    """``StrategyContext.completion`` in the proxy (see the module docstring).

    Attributes:
        kwargs: the request's keyword arguments as the deployment hook received them.
    """

    kwargs: Mapping[str, Any]

    async def __call__(self, **overrides: Any) -> Any:
        """Call the request's deployment; ``overrides`` (messages, ``tools=None``) apply, but
        never to the model."""
        wire = {k: v for k, v in self.kwargs.items() if k not in _NOT_FORWARDED}
        wire.update(overrides)
        wire["model"] = self.kwargs.get("model")
        return await real_acompletion()(**{k: v for k, v in wire.items() if v is not None})
