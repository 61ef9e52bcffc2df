"""What a replay measured: per call, per strategy list, and the stable JSON of ``--json``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxmw.replay.caching import CACHING_MODELS, Prices, Split
from ctxmw.replay.loss import CallLoss
from ctxmw.replay.optimal import Optimum
from ctxmw.replay.readbacks import Readback

__all__ = ["CallFigures", "ReplayResult", "Retention", "StrategyFigures", "retention"]


@dataclass(frozen=True, slots=True)
class CallFigures:
    """One call point under one strategy list.

    Attributes:
        transcript: index of the transcript (in ``ReplayResult.transcripts``).
        message_index: the call point: ``messages[:message_index]`` was sent.
        prompt_tokens: tokens of the prompt after the strategies.
        prefix_tokens: tokens of its common prefix with the previous call's prompt.
        previous_tokens: tokens of the previous call's prompt (0 on a transcript's first call);
            without the reply primer, so an unbroken prefix reuses all of it.
        broke: the previous prompt is not a prefix of this one.
        splits: cache reads and writes per caching model.
        cost: USD per caching model, without the read-back.
        loss: the references of this call point and what the prompt shows of them
            (:mod:`ctxmw.replay.loss`).
        readback: the extra call this point paid to read back what its next action needed
            only behind a handle (:mod:`ctxmw.replay.readbacks`); None when it needed none.
    """

    transcript: int
    message_index: int
    prompt_tokens: int
    prefix_tokens: int
    previous_tokens: int
    broke: bool
    splits: dict[str, Split]
    cost: dict[str, float]
    loss: CallLoss = field(default_factory=CallLoss)
    readback: Readback | None = None

    def total(self, key: str) -> float:
        """USD of this call point under caching model ``key``, its read-back included."""
        return self.cost[key] + (self.readback.cost[key] if self.readback is not None else 0.0)


@dataclass(frozen=True, slots=True)
class Retention:
    """Tool results of the original transcript and what the model sees of them at the last call.

    Attributes:
        results: completed tool results in the transcript(s).
        full: shown unchanged.
        compacted: shown, shortened (content differs from the original).
        cleared: shown as a strategy's placeholder only (``clear_tool_results``).
        dropped: not shown at all.
    """

    results: int = 0
    full: int = 0
    compacted: int = 0
    cleared: int = 0
    dropped: int = 0

    def __add__(self, other: Retention) -> Retention:
        return Retention(
            self.results + other.results,
            self.full + other.full,
            self.compacted + other.compacted,
            self.cleared + other.cleared,
            self.dropped + other.dropped,
        )


def retention(
    sent: Sequence[Any], prompt: Sequence[Any], stats: Mapping[str, Mapping[str, Any]]
) -> Retention:
    """Compare the tool results of ``sent`` with what ``prompt`` shows of them.

    A result whose content equals a placeholder that a strategy reported in ``stats`` (the
    ``placeholder`` key) counts as cleared, not compacted: the model sees nothing of it.
    """
    placeholders = {entry["placeholder"] for entry in stats.values() if "placeholder" in entry}
    shown = {m.get("tool_call_id"): m for m in prompt if _is_result(m)}
    counts = {"full": 0, "compacted": 0, "cleared": 0, "dropped": 0}
    originals = [m for m in sent if _is_result(m)]
    for original in originals:
        seen = shown.get(original.get("tool_call_id"))
        if seen is None:
            counts["dropped"] += 1
        elif seen is original or seen.get("content") == original.get("content"):
            counts["full"] += 1
        elif isinstance(seen.get("content"), str) and seen["content"] in placeholders:
            counts["cleared"] += 1
        else:
            counts["compacted"] += 1
    return Retention(results=len(originals), **counts)


def _is_result(message: Any) -> bool:
    return isinstance(message, Mapping) and message.get("role") == "tool"


@dataclass(frozen=True, slots=True)
class StrategyFigures:
    """Every call point of one strategy list, and the totals ``ctxmw replay`` shows.

    Attributes:
        name: the strategy list as given.
        calls: per call point, in transcript order.
        retention: tool results at each transcript's last call point (summed).
        window: the context window ``over_window_calls`` compares with.
        retentions: the retention of each transcript, in order.
    """

    name: str
    calls: list[CallFigures] = field(repr=False)
    retention: Retention
    window: int
    retentions: list[Retention] = field(default_factory=list, repr=False)

    def only(self, transcript: int) -> StrategyFigures:
        """The figures of one transcript (by index)."""
        calls = [c for c in self.calls if c.transcript == transcript]
        kept = self.retentions[transcript] if self.retentions else Retention()
        return StrategyFigures(self.name, calls, kept, self.window, [kept])

    @property
    def prompt_tokens_total(self) -> int:
        """Prompt tokens summed over every call point."""
        return sum(c.prompt_tokens for c in self.calls)

    @property
    def prompt_tokens_peak(self) -> int:
        """The largest prompt."""
        return max((c.prompt_tokens for c in self.calls), default=0)

    @property
    def reuse_fraction(self) -> float:
        """Of the tokens sent on each previous call, the share this call repeats as its prefix
        (token-weighted over every call that has a previous one; 1.0: prompts only grew)."""
        previous = sum(c.previous_tokens for c in self.calls)
        return sum(c.prefix_tokens for c in self.calls) / previous if previous else 0.0

    @property
    def breaks(self) -> int:
        """Calls whose previous prompt is not a prefix of theirs."""
        return sum(1 for c in self.calls if c.broke)

    @property
    def over_window_calls(self) -> int:
        """Calls whose prompt exceeds the window."""
        return sum(1 for c in self.calls if c.prompt_tokens > self.window)

    @property
    def cost(self) -> dict[str, float]:
        """USD per caching model, summed over every call point, read-backs included."""
        return {key: sum(c.total(key) for c in self.calls) for key in CACHING_MODELS}

    @property
    def cost_without_readbacks(self) -> dict[str, float]:
        """USD per caching model of the call points alone, as if reading back were free."""
        return {key: sum(c.cost[key] for c in self.calls) for key in CACHING_MODELS}

    @property
    def readback_calls(self) -> int:
        """Extra calls paid to read back what a next action needed only behind a handle."""
        return sum(c.readback.calls for c in self.calls if c.readback is not None)

    @property
    def references(self) -> int:
        """References over every call point (:mod:`ctxmw.replay.loss`)."""
        return sum(c.loss.references for c in self.calls)

    @property
    def shown(self) -> int:
        """References the prompts still showed."""
        return sum(c.loss.shown for c in self.calls)

    @property
    def recoverable(self) -> int:
        """References only behind a read-back handle."""
        return sum(c.loss.recoverable for c in self.calls)

    @property
    def gone(self) -> int:
        """References neither shown nor recoverable."""
        return sum(c.loss.gone for c in self.calls)

    @property
    def hidden_share(self) -> float:
        """Gone / references (0.0 without references)."""
        return self.gone / self.references if self.references else 0.0

    @property
    def recoverable_share(self) -> float:
        """Recoverable / references (0.0 without references)."""
        return self.recoverable / self.references if self.references else 0.0

    def cache_tokens(self, kind: str) -> dict[str, int]:
        """Cache ``reads`` or ``writes`` per caching model, summed over every call (read-backs
        included)."""
        return {
            key: sum(
                getattr(c.splits[key], kind)
                + (getattr(c.readback.splits[key], kind) if c.readback is not None else 0)
                for c in self.calls
            )
            for key in CACHING_MODELS
        }


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """Everything a replay measured.

    Attributes:
        transcripts: names (paths) of the transcripts replayed, in order.
        calls: call points replayed (summed over transcripts).
        window: the context window in tokens.
        prices: the model and its prices.
        strategies: per strategy list as given; the baseline is always present.
        baseline: the key of the baseline (``none``).
        optima: the cheapest boundary schedule of each transcript (:mod:`ctxmw.replay.optimal`).
    """

    transcripts: list[str]
    calls: int
    window: int
    prices: Prices
    strategies: dict[str, StrategyFigures]
    baseline: str
    optima: list[Optimum] = field(default_factory=list)

    @property
    def optimal(self) -> Optimum | None:
        """The optimum summed over every transcript (None when it was not computed)."""
        if not self.optima:
            return None
        total = self.optima[0]
        for more in self.optima[1:]:
            total = total + more
        return total

    def ratio_to_baseline(self, name: str) -> dict[str, float | None]:
        """Cost of one strategy list over the baseline's, per caching model."""
        base = self.strategies[self.baseline].cost
        mine = self.strategies[name].cost
        return {key: (mine[key] / base[key] if base[key] else None) for key in CACHING_MODELS}

    def ratio_to_optimal(self, name: str) -> dict[str, float | None]:
        """Cost of one strategy list over the optimum's, per caching model."""
        best = self.optimal
        mine = self.strategies[name].cost
        if best is None:
            return dict.fromkeys(CACHING_MODELS)
        return {
            key: (mine[key] / best.cost[key] if best.cost[key] else None) for key in CACHING_MODELS
        }

    def only(self, transcript: int) -> ReplayResult:
        """The result restricted to one transcript (by index)."""
        figures = {name: s.only(transcript) for name, s in self.strategies.items()}
        calls = len(next(iter(figures.values())).calls)
        optima = self.optima[transcript : transcript + 1]
        name = self.transcripts[transcript]
        return ReplayResult([name], calls, self.window, self.prices, figures, self.baseline, optima)

    def to_json(self) -> dict[str, Any]:
        """The stable machine-readable form (runtime spec, section 7), plus model and prices."""
        return {
            "transcripts": list(self.transcripts),
            "calls": self.calls,
            "window": self.window,
            "model": self.prices.model,
            "prices": {
                "input": self.prices.input,
                "output": self.prices.output,
                "cache_read": self.prices.cache_read,
                "cache_write": self.prices.cache_write,
                "source": dict(self.prices.source),
            },
            "strategies": {name: self._entry(name) for name in self.strategies},
            "optimal": self._optimal_entry(),
            "per_transcript": [
                {"transcript": name, **self.only(i)._summary()}
                for i, name in enumerate(self.transcripts)
            ]
            if len(self.transcripts) > 0
            else [],
        }

    def _summary(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "strategies": {name: self._entry(name) for name in self.strategies},
            "optimal": self._optimal_entry(),
        }

    def _optimal_entry(self) -> dict[str, Any] | None:
        best = self.optimal
        if best is None:
            return None
        return {
            "cost": {key: round(value, 6) for key, value in best.cost.items()},
            "moves": dict(best.moves),
            "cost_ratio_to_none": {
                key: round(value / base, 6)
                if (base := self.strategies[self.baseline].cost[key])
                else None
                for key, value in best.cost.items()
            },
        }

    def _entry(self, name: str) -> dict[str, Any]:
        s = self.strategies[name]
        return {
            "prompt_tokens_total": s.prompt_tokens_total,
            "prompt_tokens_peak": s.prompt_tokens_peak,
            "reuse_fraction": round(s.reuse_fraction, 6),
            "breaks": s.breaks,
            "over_window_calls": s.over_window_calls,
            "retained_full": s.retention.full,
            "retained_compacted": s.retention.compacted,
            "retained_cleared": s.retention.cleared,
            "tool_results": s.retention.results,
            "references": s.references,
            "references_shown": s.shown,
            "references_recoverable": s.recoverable,
            "references_gone": s.gone,
            "hidden_share": round(s.hidden_share, 6),
            "recoverable_share": round(s.recoverable_share, 6),
            "cache_read_tokens": s.cache_tokens("reads"),
            "cache_write_tokens": s.cache_tokens("writes"),
            "readback_calls": s.readback_calls,
            "cost": {key: round(value, 6) for key, value in s.cost.items()},
            "cost_without_readbacks": {
                key: round(value, 6) for key, value in s.cost_without_readbacks.items()
            },
            "cost_ratio_to_none": {
                key: None if value is None else round(value, 6)
                for key, value in self.ratio_to_baseline(name).items()
            },
            "cost_ratio_to_optimal": {
                key: None if value is None else round(value, 6)
                for key, value in self.ratio_to_optimal(name).items()
            },
        }
