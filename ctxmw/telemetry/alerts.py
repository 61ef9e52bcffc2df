"""Alert rules over a session's records: a cache that stops paying, said while it happens.

Every rule waits for the cache to be warm. A call is *warm* when the call before it sent at
least the smallest prefix its caching rule caches (:func:`~ctxmw.telemetry.rules.cache_minimum`:
1,024 tokens for ``openai``, the model's minimum for ``breakpoints`` and ``gemini``, nothing for
``exact``); before that the provider could not have read anything, so a low hit rate or a bust
costs nothing and says nothing. Under ``none`` (a provider ctxmw knows no caching rule for) no
call is warm: only ``drift`` can tell that the provider caches after all. The warm-up therefore
lasts as many calls as the prompt needs to reach the minimum, not a fixed count. The rules,
evaluated per session after every warm call:

- ``low_hit_rate``: over the last ``window`` warm calls, the provider's cache reads are under
  ``min_hit_rate`` of their prompt tokens (token-weighted: sum over sum). A call whose prefix a
  strategy chose to move (a ``strategy`` bust: it traded the cache for a shorter prompt, which
  ``ctxmw replay`` and the report weigh) is left out, and so is a call whose provider reported
  no cache reads; a window with none of them says nothing.
- ``drift``: over the last ``window`` warm calls, the reported cached fraction (reads over the
  provider's prompt tokens) and the expected one (ctxmw's expectation over its own prompt count)
  differ by more than ``max_drift``. Fractions, because the two sides may count with different
  tokenizers.
- ``write_every_call``: each of the last ``window`` warm calls wrote more than
  ``write_fraction`` of its prompt to the cache: the cache is rewritten instead of read (a
  moving breakpoint, a prefix that never repeats). Only providers that report writes
  (Anthropic, Bedrock) can trip it.
- ``bust_every_call``: every warm call of the session so far broke the cached prefix, ``window``
  of them in a row: whatever moves it (often a strategy rewriting the start of the prompt), the
  cache never pays. Fires once per session.
- ``bust_tools`` / ``bust_system``: a warm call whose bust cause is the tools list or the system
  prompt (the whole cache after it is lost, and no strategy chose it). Which causes alert is the
  ``alert_bust_causes`` setting. One alert per cause per session, at its first call: a timestamp
  in the system prompt busts every call, and one alert says so; :func:`evaluate` (``ctxmw
  stats``) adds how many warm calls of the session the cause broke.

The windowed rules fire when their condition becomes true and again only after it was false:
a collapse is one alert, not one per call. Every alert names its session, its call, the rule,
the figure and the threshold. :class:`AlertState` works on ledger dicts, so the same code serves
the live recorder and ``ctxmw stats --check`` reading a ledger afterwards.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from ctxmw.settings import Settings
from ctxmw.telemetry.rules import cache_minimum

__all__ = ["ALERT_RULES", "Alert", "AlertRules", "AlertState", "evaluate", "fills_cache"]

ALERT_RULES = (
    "low_hit_rate",
    "drift",
    "write_every_call",
    "bust_every_call",
    "bust_tools",
    "bust_system",
    "bust_transcript",
    "bust_strategy",
)
"""Every rule name an :class:`Alert` can carry (``bust_transcript`` and ``bust_strategy`` only
when ``alert_bust_causes`` lists their cause)."""


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
        window: warm calls per window of the windowed rules (and the run ``bust_every_call``
            waits for).
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


def fills_cache(record: Mapping[str, Any]) -> bool:
    """Whether a call's prompt was long enough for its caching rule to cache it (see above).

    A record without a ``cache_rule`` (written by hand) counts as caching from its first token.
    """
    rule = record.get("cache_rule")
    if rule == "none":
        return False
    if not isinstance(rule, str) or not rule:
        return True
    model, provider = str(record.get("model") or ""), record.get("provider")
    minimum = cache_minimum(rule, model, provider if isinstance(provider, str) else None)
    return _int(record.get("prompt_tokens_local")) >= max(minimum, 1)


class AlertState:
    """One session's recent records and which windowed rules are firing.

    Args:
        rules: the thresholds.
    """

    def __init__(self, rules: AlertRules | None = None) -> None:
        self.rules = rules if rules is not None else AlertRules()
        # Per windowed call only the figures the rules read (a tuple of ints and None), not the
        # ledger dict with its nested lists.
        self._recent: deque[_Figures] = deque(maxlen=self.rules.window)  # warm calls
        # The rules firing now (replaced when it changes; empty while none fires).
        self._firing: tuple[str, ...] = ()
        self._calls = 0
        self._filled = False  # the previous call's prompt reached its rule's minimum
        self._busted: int | None = 0  # warm calls that all busted; None once one did not
        self.bust_counts: dict[str, int] = {}  # warm calls each alerting cause broke

    def export(self) -> dict[str, Any]:
        """What the next records' alerts depend on, as JSON-ready figures (no content)."""
        return {
            "recent": [list(figures) for figures in self._recent],
            "firing": list(self._firing),
            "calls": self._calls,
            "filled": self._filled,
            "busted": self._busted,
        }

    def restore(self, data: Mapping[str, Any] | None) -> None:
        """Continue from :meth:`export`'s data (None: from the start)."""
        if data is None:
            return
        self._recent.extend(
            (r[0], int(r[1]), int(r[2]), int(r[3]), r[4], bool(r[5])) for r in data["recent"]
        )
        self._firing = tuple(str(rule) for rule in data["firing"])
        self._calls, self._filled = int(data["calls"]), bool(data["filled"])
        busted = data["busted"]
        self._busted = None if busted is None else int(busted)

    def observe(self, record: Mapping[str, Any]) -> list[Alert]:
        """Take the session's next record (a ledger dict); return the rules it made fire."""
        self._calls += 1
        warm = self._filled
        if record.get("kind", "agent") == "agent":  # a summary's prompt is not the agent's cache
            self._filled = fills_cache(record)
        if not warm:  # the cache is filling: the provider could not have read anything yet
            return []
        alerts = [*self._bust(record), *self._every_call(record)]
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
        cause = _cause(record)
        if cause is None or cause not in self.rules.bust_causes:
            return []
        seen = self.bust_counts.get(cause, 0)
        self.bust_counts[cause] = seen + 1
        if seen:  # one alert per cause per session: the count goes on
            return []
        what = _CAUSES.get(cause, cause)
        text = (
            f"broke the cached prefix at {what}: everything after it is sent uncached; keep it "
            "byte-stable between calls."
        )
        return [self._alert(record, f"bust_{cause}", None, None, text)]

    def _every_call(self, record: Mapping[str, Any]) -> list[Alert]:
        if self._busted is None:
            return []
        if _cause(record) is None:
            self._busted = None  # a warm call kept the prefix: the cache paid at least once
            return []
        self._busted += 1
        if self._busted < self.rules.window:
            return []
        n, self._busted = self._busted, None  # once per session
        bust = record.get("bust")
        by = _bust_label(bust) if isinstance(bust, Mapping) else "?"
        text = (
            f"each of its {n} warm calls so far broke the cached prefix ({n} is the "
            f"alert_window; the last bust: {by}): the cache has not paid once in this session. "
            "Keep the start of the prompt byte-stable between calls (ctxmw replay compares "
            "strategies on a transcript)."
        )
        window = float(self.rules.window)
        return [self._alert(record, "bust_every_call", float(n), window, text)]

    def _alert(
        self,
        record: Mapping[str, Any],
        rule: str,
        value: float | None,
        threshold: float | None,
        text: str,
    ) -> Alert:
        session = str(record.get("session", ""))
        return Alert(
            rule=rule,
            session=session,
            round=int(record.get("round") or 0),
            call=self._calls,
            value=value,
            threshold=threshold,
            message=f"Session {session!r}, call {self._calls}: {text}",
        )


def evaluate(records: Sequence[Mapping[str, Any]], rules: AlertRules | None = None) -> list[Alert]:
    """Every alert a sequence of ledger records fires, one :class:`AlertState` per session.

    A bust alert (fired once per cause per session) says how many of the session's warm calls
    its cause broke, and carries that count as its ``value``.
    """
    states: dict[str, AlertState] = {}
    alerts: list[Alert] = []
    for record in records:
        state = states.setdefault(str(record.get("session", "")), AlertState(rules))
        alerts.extend(state.observe(record))
    return [_counted(alert, states[alert["session"]]) for alert in alerts]


def _counted(alert: Alert, state: AlertState) -> Alert:
    """A bust alert with the count of the session's warm calls its cause broke."""
    count = state.bust_counts.get(alert["rule"].removeprefix("bust_"))
    if count is None or alert["rule"] == "bust_every_call":
        return alert
    counted = alert.copy()
    counted["value"] = float(count)
    calls = "call" if count == 1 else "calls"
    counted["message"] = f"{alert['message']} It broke {count} warm {calls} of this session."
    return counted


_CAUSES = {"tools": "the tools list", "system": "the system prompt"}
_LOW = (
    "the cache hit rate over its last {n} warm calls (leaving out those a strategy chose to "
    "bust) is {value:.1%}, under the alert_min_hit_rate of {threshold:.1%}: look at the busts "
    "of these calls (ctxmw stats)."
)
_DRIFT = (
    "over its last {n} warm calls the provider's cached fraction and ctxmw's expected one "
    "differ by {value:.3f}, over the alert_max_drift of {threshold:.3f}: the caching rule does "
    "not match this provider (see the cache_rule setting)."
)
_WRITES = (
    "each of its last {n} warm calls wrote at least {value:.1%} of its prompt to the cache "
    "(over the alert_write_fraction of {threshold:.1%}): the cache is rewritten, not read."
)


def _cause(record: Mapping[str, Any]) -> str | None:
    bust = record.get("bust")
    cause = bust.get("cause") if isinstance(bust, Mapping) else None
    return str(cause) if cause is not None else None


def _bust_label(bust: Mapping[str, Any]) -> str:
    cause, strategy = str(bust.get("cause", "?")), bust.get("strategy")
    return f"{cause}:{strategy}" if strategy else cause


_Figures = tuple[int | None, int, int, int, int | None, bool]
"""One call as the windowed rules read it: cache reads (None: not reported), prompt tokens,
expected cached tokens, local prompt tokens, cache writes (None: not reported), and whether a
strategy chose to bust its prefix."""


def _figures(record: Mapping[str, Any]) -> _Figures:
    reads, writes = record.get("cache_read_tokens"), record.get("cache_write_tokens")
    return (
        None if reads is None else _int(reads),
        _int(record.get("prompt_tokens")),
        _int(record.get("expected_cached_tokens")),
        _int(record.get("prompt_tokens_local")),
        None if writes is None else _int(writes),
        _cause(record) == "strategy",
    )


def _windowed(
    rules: AlertRules, recent: Sequence[_Figures]
) -> tuple[tuple[str, float | None, float, str, bool], ...]:
    """``(rule, value, threshold, message template, whether it fired)`` per windowed rule."""
    reported = [r for r in recent if r[0] is not None]
    hit = _ratio([(r[0] or 0, r[1]) for r in reported if not r[5]])  # what no strategy chose
    read = _ratio([(r[0] or 0, r[1]) for r in reported])
    expected = _ratio([(r[2], r[3]) for r in reported])
    drift = None if read is None or expected is None else abs(read - expected)
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
    for _, prompt, _, _, writes, _ in recent:
        if writes is None or not prompt:
            return None
        shares.append(writes / prompt)
    return min(shares) if shares else None


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
