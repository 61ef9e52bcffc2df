"""Settings for one call, built only when the explicit values or the environment changed."""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any

from ctxmw.errors import SettingsError
from ctxmw.settings._checks import ENV_PREFIX
from ctxmw.settings._model import Settings

__all__ = ["resolve_settings"]


def resolve_settings(
    settings: Settings | Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings for one call: env and defaults, then ``settings``, then ``overrides``.

    The same explicit values under the same ``CTXMW_*`` environment give the same (frozen)
    object as a recent call: the environment is read now, the fields are validated only when
    something changed (see the module docstring).
    """
    if settings is not None and not isinstance(settings, Settings | Mapping):
        raise SettingsError(
            f"settings={settings!r} is neither a ctxmw.Settings nor a mapping of setting names "
            "to values; pass ctxmw.Settings(...) or a dict such as {'epoch_size': 30}."
        )
    if isinstance(settings, Settings) and not overrides:
        return settings
    key = _resolution_key(settings, overrides)
    if key is None:
        return _build(settings, overrides)
    found = _resolved.get(key)
    if found is None:
        found = _build(settings, overrides)
        _resolved[key] = found
        while len(_resolved) > _MAX_RESOLVED:
            _resolved.popitem(last=False)
    else:
        _resolved.move_to_end(key)
    return found


def _build(
    settings: Settings | Mapping[str, Any] | None, overrides: Mapping[str, Any] | None
) -> Settings:
    if settings is None:
        base = Settings()
    elif isinstance(settings, Settings):
        base = settings
    else:
        base = Settings(**settings)
    return base.with_overrides(overrides)


_MAX_RESOLVED = 256
# Keyed by the explicit values (frozen, with their types) and the CTXMW_* variables; a Settings
# object given explicitly is keyed by identity and kept alive by its entry.
_resolved: OrderedDict[Hashable, Settings] = OrderedDict()


class _Same:
    """A key part that is one object (hashed and compared by identity)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.value is self.value


def _resolution_key(
    settings: Settings | Mapping[str, Any] | None, overrides: Mapping[str, Any] | None
) -> Hashable | None:
    """What the result of :func:`resolve_settings` depends on, or None when not hashable."""
    try:
        given = _Same(settings) if isinstance(settings, Settings) else _frozen(settings)
        return (_environment(), given, _frozen(overrides))
    except TypeError:  # a value that cannot be keyed: build the settings every time
        return None


def _environment() -> tuple[tuple[str, str], ...]:
    # pydantic-settings matches the prefix case-insensitively and reads no .env file here.
    prefix = ENV_PREFIX.lower()
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.lower().startswith(prefix)))


def _frozen(value: Any) -> Hashable:
    """A hashable stand-in equal for equal values of equal types (1, 1.0 and True differ)."""
    if isinstance(value, Mapping):
        return ("map", tuple(sorted((str(k), _frozen(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_frozen(v) for v in value))
    if value is None or isinstance(value, str | int | float | bool):
        return (type(value).__name__, value)
    raise TypeError(f"{type(value).__name__} is not keyed")
