"""Alert rules over a session's records: a cache that stops paying, said while it happens.

The rules (each evaluated per session, after every call; the session's first call, always a
cold cache, is never part of a window):

- ``low_hit_rate``: over the last ``window`` calls, the provider's cache reads are under
  ``min_hit_rate`` of their prompt tokens (token-weighted: sum over sum). Only calls whose
  provider reported cache reads count; a window with none of them says nothing.
- ``drift``: over the same window, the reported cached fraction (reads over the provider's
  prompt tokens) and the expected one (ctxmw's expectation over its own prompt count) differ by
  more than ``max_drift``. Fractions, because the two sides may count with different tokenizers.
- ``write_every_call``: each call of the window wrote more than ``write_fraction`` of its prompt
  to the cache: the cache is rewritten instead of read (a moving breakpoint, a prefix that
  never repeats). Only providers that report writes (Anthropic, Bedrock) can trip it.
- ``bust_tools`` / ``bust_system``: a bust whose cause is the tools list or the system prompt
  (the whole cache after it is lost, and no strategy chose it). Which causes alert is the
  ``alert_bust_causes`` setting.

The windowed rules fire when their condition becomes true and again only after it was false:
a collapse is one alert, not one per call. :class:`AlertState` works on ledger dicts, so the
same code serves the live recorder and ``ctxmw stats --check`` reading a ledger afterwards.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from ctxmw.settings import Settings

__all__ = ["ALERT_RULES", "Alert", "AlertRules", "AlertState", "evaluate"]

ALERT_RULES = ("low_hit_rate", "drift", "write_every_call", "bust_tools", "bust_system")
"""Every rule name an :class:`Alert` can carry."""


class Alert(TypedDict):
    """One fired rule, as the ledger, the hooks and the OTel events carry it."""

    rule: str
    session: str
    round: int
    call: int
    value: float | None
    threshold: float | None
    message: str


@dataclass(frozen=True, slots=True)
class AlertRules:
    """The thresholds of the rules (the ``alert_*`` settings).

    Attributes:
        window: calls per window of the windowed rules.
        min_hit_rate: ``low_hit_rate`` fires under this share of prompt tokens read.
        max_drift: ``drift`` fires when reported and expected fractions differ by more.
        write_fraction: ``write_every_call`` fires when every call wrote more than this share.
        bust_causes: bust causes that fire ``bust_<cause>``.
    """

    window: int = 10
    min_hit_rate: float = 0.5
    max_drift: float = 0.1
    write_fraction: float = 0.5
    bust_causes: tuple[str, ...] = ("tools", "system")

    @classmethod
    def from_settings(cls, settings: Settings) -> AlertRules:
        """The rules as ``settings`` configure them."""
        return cls(
            window=settings.alert_window,
            min_hit_rate=settings.alert_min_hit_rate,
            max_drift=settings.alert_max_drift,
            write_fraction=settings.alert_write_fraction,
            bust_causes=tuple(settings.alert_bust_causes),
        )


class AlertState:
    """One session's recent records and which windowed rules are firing.

    Args:
        rules: the thresholds.
    """

    def __init__(self, rules: AlertRules | None = None) -> None:
        self.rules = rules if rules is not None else AlertRules()
        # Per windowed call only the figures the rules read, as a tuple of ints and None (the
        # collector stops tracking such a tuple): not the ledger dict with its nested lists.
        self._recent: deque[_Figures] = deque(maxlen=self.rules.window)
        # The rules firing now: a tuple, the shared empty one while none fires (an empty set
        # would be one more tracked object per session for every full gc pass to walk).
        self._firing: tuple[str, ...] = ()
        self._calls = 0

    def observe(self, record: Mapping[str, Any]) -> list[Alert]:
        """Take the session's next record (a ledger dict); return the rules it made fire."""
        self._calls += 1
        alerts = self._bust(record)
        if self._calls == 1:
            return alerts
        self._recent.append(_figures(record))
        full = len(self._recent) == self.rules.window
        for rule, value, threshold, text, fired in _windowed(self.rules, self._recent):
            if not full or value is None or not fired:
                if rule in self._firing:
                    self._firing = tuple(r for r in self._firing if r != rule)
            elif rule not in self._firing:  # the message is written only when it is sent
                self._firing += (rule,)
                message = text.format(n=self.rules.window, value=value, threshold=threshold)
                alerts.append(self._alert(record, rule, value, threshold, message))
        return alerts

    def _bust(self, record: Mapping[str, Any]) -> list[Alert]:
        bust = record.get("bust")
        cause = bust.get("cause") if isinstance(bust, Mapping) else None
        if cause not in self.rules.bust_causes:
            return []
        what = {"tools": "the tools list", "system": "the system prompt"}.get(str(cause), cause)
        text = (
            f"Call {self._calls} of session {record.get('session')!r} broke the cached prefix "
            f"at {what}: everything after it is sent uncached; keep it byte-stable between calls."
        )
        return [self._alert(record, f"bust_{cause}", None, None, text)]

    def _alert(
        self,
        record: Mapping[str, Any],
        rule: str,
        value: float | None,
        threshold: float | None,
        text: str,
    ) -> Alert:
        return Alert(
            rule=rule,
            session=str(record.get("session", "")),
            round=int(record.get("round") or 0),
            call=self._calls,
            value=value,
            threshold=threshold,
            message=text,
        )


def evaluate(records: Sequence[Mapping[str, Any]], rules: AlertRules | None = None) -> list[Alert]:
    """Every alert a sequence of ledger records fires, one :class:`AlertState` per session."""
    states: dict[str, AlertState] = {}
    alerts: list[Alert] = []
    for record in records:
        state = states.setdefault(str(record.get("session", "")), AlertState(rules))
        alerts.extend(state.observe(record))
    return alerts


_LOW = (
    "The cache hit rate over the last {n} calls is {value:.1%}, under the alert_min_hit_rate "
    "of {threshold:.1%}: look at the busts of these calls (ctxmw stats)."
)
_DRIFT = (
    "Over the last {n} calls the provider's cached fraction and ctxmw's expected one differ by "
    "{value:.3f}, over the alert_max_drift of {threshold:.3f}: the caching rule does not match "
    "this provider (see the cache_rule setting)."
)
_WRITES = (
    "Each of the last {n} calls wrote at least {value:.1%} of its prompt to the cache (over the "
    "alert_write_fraction of {threshold:.1%}): the cache is rewritten, not read."
)


_Figures = tuple[int | None, int, int, int, int | None]
"""One call as the windowed rules read it: cache reads (None: not reported), prompt tokens,
expected cached tokens, local prompt tokens, cache writes (None: not reported)."""


def _figures(record: Mapping[str, Any]) -> _Figures:
    reads, writes = record.get("cache_read_tokens"), record.get("cache_write_tokens")
    return (
        None if reads is None else _int(reads),
        _int(record.get("prompt_tokens")),
        _int(record.get("expected_cached_tokens")),
        _int(record.get("prompt_tokens_local")),
        None if writes is None else _int(writes),
    )


def _windowed(
    rules: AlertRules, recent: Sequence[_Figures]
) -> tuple[tuple[str, float | None, float, str, bool], ...]:
    """``(rule, value, threshold, message template, whether it fired)`` per windowed rule."""
    reported = [r for r in recent if r[0] is not None]
    hit = _ratio([(r[0] or 0, r[1]) for r in reported])
    expected = _ratio([(r[2], r[3]) for r in reported])
    drift = None if hit is None or expected is None else abs(hit - expected)
    writes = _min_write_share(recent)
    low = hit is not None and hit < rules.min_hit_rate
    drifted = drift is not None and drift > rules.max_drift
    rewritten = writes is not None and writes > rules.write_fraction
    return (
        ("low_hit_rate", hit, rules.min_hit_rate, _LOW, low),
        ("drift", drift, rules.max_drift, _DRIFT, drifted),
        ("write_every_call", writes, rules.write_fraction, _WRITES, rewritten),
    )


def _ratio(pairs: Sequence[tuple[int, int]]) -> float | None:
    total = sum(den for _, den in pairs)
    return sum(num for num, _ in pairs) / total if pairs and total else None


def _min_write_share(recent: Sequence[_Figures]) -> float | None:
    shares = []
    for _, prompt, _, _, writes in recent:
        if writes is None or not prompt:
            return None
        shares.append(writes / prompt)
    return min(shares) if shares else None


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
