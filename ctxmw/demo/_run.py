"""Run the demo: one scripted session per strategy list, then one row of figures each."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

import ctxmw
from ctxmw._files import Beside
from ctxmw._litellm import load_litellm
from ctxmw.demo._provider import SimulatedProvider
from ctxmw.demo._script import PlanStep, make_plan
from ctxmw.demo._tools import ToolBox
from ctxmw.errors import UsageError
from ctxmw.replay import DEFAULT_STRATEGY_LISTS, replay
from ctxmw.replay.figures import Retention, retention
from ctxmw.runtime.session import Session
from ctxmw.settings import Settings
from ctxmw.strategies._chain import apply_strategies, resolve_strategies
from ctxmw.telemetry import CallRecord
from ctxmw.telemetry.counters import ApproxCounter, LiteLLMCounter
from ctxmw.types import Messages, StrategyContext

__all__ = ["DEMO_STRATEGIES", "SIMULATED_MODEL", "DemoRow", "check_strategies", "run_demo"]

DEMO_STRATEGIES = DEFAULT_STRATEGY_LISTS  # the demo compares what replay compares
SIMULATED_MODEL = "openai/gpt-4o"
TASK = (
    "Work through the ctxmw package module by module: find where each is used, read it, run "
    "its tests, fix the function that fails, and tidy the lines you reviewed earlier."
)
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class DemoRow:
    """The figures of one strategy list over the whole scripted session."""

    strategies: str
    calls: int
    tool_calls: int
    prompt_tokens: int
    peak_prompt_tokens: int
    cached_reported: int
    cached_expected: int
    cost_usd: float | None
    results_full: int
    results_compacted: int
    results_cleared: int
    results_total: int
    hidden: float = 0.0
    """Share of the references the model's next action took from a tool result that the prompt
    no longer showed (:mod:`ctxmw.replay.loss`), over every call of the session."""
    readbacks: int = 0
    """Model calls ctxmw made to go on past a reply that only read back (counted in calls)."""

    @property
    def hit_rate(self) -> float:
        """Provider-reported cache reads over prompt tokens."""
        return self.cached_reported / self.prompt_tokens if self.prompt_tokens else 0.0


async def run_demo(
    out_dir: Path,
    *,
    calls: int = 240,
    strategies: Sequence[str] = DEMO_STRATEGIES,
    model: str | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    progress: Progress | None = None,
) -> list[DemoRow]:
    """Run the scripted agent once per strategy list; write transcripts and ledgers to out_dir.

    Args:
        out_dir: where ``<strategies>.jsonl`` transcripts and their ledgers go (replaced).
        calls: about how many tool calls the scripted plan makes.
        strategies: strategy lists to compare.
        model, api_base, api_key: a real provider instead of the simulated one (with a real
            model the model decides what to call; the tools and the task are the same).
        progress: called with (calls done, calls expected) after every model call.

    Raises:
        UnknownStrategyError: a list names a strategy that is not registered.
        SettingsError: a ``CTXMW_*`` variable is invalid.
    """
    specs = check_strategies(strategies)
    root = Path(ctxmw.__file__).parent
    plan = await anyio.to_thread.run_sync(make_plan, root, calls)
    await anyio.Path(out_dir).mkdir(parents=True, exist_ok=True)
    counter = _Counter(len(specs) * (len(plan) + 1), progress)
    async with anyio.create_task_group() as tg:
        target = await _target(tg, plan, model, api_base, api_key)
        try:
            rows = [
                await _run_one(out_dir, spec, root, len(plan), target, counter) for spec in specs
            ]
        finally:
            await target.aclose()
            tg.cancel_scope.cancel()
    return rows


@dataclass(frozen=True, slots=True)
class _Target:
    model: str
    kwargs: dict[str, Any]
    provider: SimulatedProvider | None = None

    async def aclose(self) -> None:
        client = self.kwargs.get("client")
        if client is not None:
            await client.close()


async def _target(
    tg: Any, plan: list[PlanStep], model: str | None, api_base: str | None, api_key: str | None
) -> _Target:
    if model is None and api_base is None:
        provider = SimulatedProvider(plan, LiteLLMCounter(), SIMULATED_MODEL.split("/", 1)[1])
        base = await provider.serve(tg)
        # Our own client, closed at the end: litellm's cached one would outlive the server.
        load_litellm()  # offline, quiet; then the OpenAI SDK litellm itself uses for openai/
        from openai import AsyncOpenAI

        client = AsyncOpenAI(base_url=base, api_key="simulated")
        kwargs = {"api_base": base, "api_key": "simulated", "client": client}
        return _Target(SIMULATED_MODEL, kwargs, provider)
    kwargs = {k: v for k, v in (("api_base", api_base), ("api_key", api_key)) if v is not None}
    return _Target(model or SIMULATED_MODEL, kwargs)


class _Counter:
    def __init__(self, total: int, progress: Progress | None) -> None:
        self.done, self.total, self.progress = 0, total, progress

    def __call__(self, record: CallRecord) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)


async def _run_one(
    out_dir: Path, spec: str, root: Path, steps: int, target: _Target, counter: _Counter
) -> DemoRow:
    save_file = out_dir / f"{spec.replace(',', '+')}.jsonl"
    await anyio.to_thread.run_sync(_clear, save_file)
    if target.provider is not None:
        # Each strategy starts cold: a shared warm cache would credit it with another's prefix.
        target.provider.forget()
    records: list[CallRecord] = []
    box = ToolBox(root)
    session = Session(
        target.model,
        save_file=save_file,
        prompt_strategies=spec,
        tools=[box.list_files, box.read_file, box.grep, box.run_tests, box.edit_file],
        # A step may first fetch back what its prompt no longer shows: one more round.
        max_rounds=2 * steps + 2,
        # The simulated provider caches like OpenAI: say so, rather than "exact" for api_base.
        strategy_options={"cache_rule": "openai"} if target.provider is not None else None,
        session=f"demo:{spec}",
        on_call=[records.append, counter],
        **target.kwargs,
    )
    await session.ask(TASK)
    kept = await _retention(session.messages, spec)
    hidden = await _hidden(session.messages, spec, target.model, bool(target.provider))
    return DemoRow(
        strategies=spec,
        calls=len(records),
        tool_calls=sum(1 for m in session.messages if m.get("role") == "tool"),
        prompt_tokens=sum(r.prompt_tokens for r in records),
        peak_prompt_tokens=max((r.prompt_tokens for r in records), default=0),
        cached_reported=sum(r.cache_read_tokens or 0 for r in records),
        cached_expected=sum(r.expected_cached_tokens for r in records),
        cost_usd=_cost(records),
        results_full=kept.full,
        results_compacted=kept.compacted,
        results_cleared=kept.cleared,
        results_total=kept.results,
        hidden=hidden,
        readbacks=sum(1 for r in records if r.readback),
    )


async def _retention(transcript: Messages, spec: str) -> Retention:
    """What the model saw of the tool results at the last call (see ``ctxmw.replay``)."""
    last = max(i for i, m in enumerate(transcript) if m.get("role") == "assistant")
    resolved = Settings()
    ctx = StrategyContext(settings=resolved)
    prompt = await apply_strategies(transcript[:last], resolve_strategies(spec, resolved), ctx)
    return retention(transcript[:last], prompt, ctx.stats)


async def _hidden(transcript: Messages, spec: str, model: str, simulated: bool) -> float:
    """What the model lost, replayed call by call as the session sent it (no model call)."""
    settings = {"cache_rule": "openai"} if simulated else None
    kw: dict[str, Any] = {"counter": ApproxCounter(), "settings": settings, "optimal": False}
    try:
        found = await replay({"demo": transcript}, [spec], model=model, **kw)
    except UsageError:  # a model litellm does not price: replay it at the simulated one's
        found = await replay({"demo": transcript}, [spec], model=SIMULATED_MODEL, **kw)
    return found.strategies[spec].hidden_share


def _cost(records: Sequence[CallRecord]) -> float | None:
    costs = [r.cost_usd for r in records]
    return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)


def check_strategies(strategies: Sequence[str]) -> list[str]:
    """The strategy lists, each checked before any session starts (settings included).

    Raises:
        UnknownStrategyError: a list names a strategy that is not registered.
        SettingsError: a ``CTXMW_*`` variable is invalid.
    """
    settings = Settings()
    for spec in strategies:
        resolve_strategies(spec, settings)
    return list(strategies)


def _clear(save_file: Path) -> None:
    beside = Beside.of(save_file)
    # The demo's own files, under today's names and an earlier version's (a stale ledger would
    # join the report).
    for path in (save_file, beside.ledger, beside.legacy("ledger"), beside.lock):
        path.unlink(missing_ok=True)
    for kind in ("inbox", "inbox_removed"):
        shutil.rmtree(beside.named(kind), ignore_errors=True)
        shutil.rmtree(beside.legacy(kind), ignore_errors=True)
