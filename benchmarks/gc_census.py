"""A census of the gc-tracked objects many sessions make: by type, and by what holds them.

Run: ``.venv/bin/python benchmarks/gc_census.py [--sessions 300] [--rounds 5] [--latency 0]``.

The sessions are ``bench_overhead.py``'s part 2 (an instant fake model, or one answering after
``--latency`` seconds). After the warm-up everything alive is frozen (``gc.freeze()``) and left
out; then, every 0.3 s, the tracked objects are counted, and at the largest count (the peak of
the calls in flight) each type's objects are grouped by what refers to them (a sample of up to
60 per type, each followed to its first referrer: an attribute of an instance, a local of a
coroutine, a key of a dict). The same census after the run gives what each finished session
keeps. Figures are per session. What a full gc pass walks is all of these, once per session.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
import tempfile
import types
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_overhead import one_session

Census = tuple[int, dict[str, tuple[int, Counter[str], int]]]


def _key_of(mapping: Any, obj: object) -> object:
    for key, value in mapping.items():
        if value is obj:
            return key
    return None


def _describe(obj: object) -> str:
    if isinstance(obj, types.CoroutineType):
        return f"coroutine {obj.cr_code.co_qualname}"
    if isinstance(obj, types.MethodType):
        return f"method {obj.__func__.__qualname__}"
    if isinstance(obj, types.FunctionType):
        return f"function {obj.__qualname__}"
    return type(obj).__name__


def _owner(obj: object, ignore: set[int]) -> str:
    """What first refers to ``obj`` (leaving out this module's own frames and lists)."""
    for ref in gc.get_referrers(obj):
        code = getattr(ref, "gi_code", None) or getattr(ref, "f_code", None)
        if id(ref) in ignore or (code is not None and code.co_filename == __file__):
            continue
        if isinstance(ref, types.CoroutineType):
            frame = ref.cr_frame
            local = _key_of(frame.f_locals, obj) if frame is not None else None
            return f"coroutine {ref.cr_code.co_qualname}.{local}"
        if isinstance(ref, dict):
            key = _key_of(ref, obj)
            for holder in gc.get_referrers(ref):
                if getattr(holder, "__dict__", None) is ref:
                    return f"{type(holder).__name__}.{key}"
            return f"dict[{key!r:.30}]"
        slots = getattr(type(ref), "__slots__", ())
        for slot in slots if isinstance(slots, tuple) else ():
            if getattr(ref, slot, None) is obj:
                return f"{type(ref).__name__}.{slot}"
        if hasattr(ref, "__dict__") and not isinstance(ref, type):
            try:
                key = _key_of(vars(ref), obj)
            except TypeError:
                key = None
            if key is not None:
                return f"{type(ref).__name__}.{key}"
        return _describe(ref)
    return "-"


def census(skip: set[int]) -> Census:
    """Tracked objects not in ``skip``: how many, and per type its count and sampled owners."""
    objects = [o for o in gc.get_objects() if id(o) not in skip]
    kinds: defaultdict[str, list[object]] = defaultdict(list)
    for obj in objects:
        kinds[type(obj).__name__].append(obj)
    ignore = {id(objects), id(kinds), *(id(v) for v in kinds.values())}
    out = {}
    for name, found in kinds.items():
        sample = found[:: max(1, len(found) // 60)]
        ignore.add(id(sample))
        owners: Counter[str] = Counter()
        for obj in sample:
            owners[f"{_describe(obj)}  <-  {_owner(obj, ignore)}"] += 1
        out[name] = (len(found), owners, len(sample))
    return len(objects), out


def show(title: str, result: Census, sessions: int, top: int = 20) -> None:
    total, kinds = result
    print(f"== {title}: {total / sessions:.1f} tracked objects per session")
    for name, (count, owners, sampled) in sorted(kinds.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {name:30} {count / sessions:7.2f}")
        for owner, n in owners.most_common(6):
            print(f"      {n / sampled * count / sessions:6.2f}  {owner}")


async def main(sessions: int, rounds: int, latency: float) -> None:
    stop, keep, peak = asyncio.Event(), [], {"n": -1, "census": (0, {})}
    with tempfile.TemporaryDirectory() as tmp:
        await one_session(Path(tmp), -1, 2, [])  # warm-up: imports, tokenizer tables
        gc.collect()
        gc.freeze()
        skip = {id(o) for o in gc.get_objects()}

        async def sample() -> None:
            while not stop.is_set():
                await asyncio.sleep(0.3)
                if len(gc.get_objects()) - len(skip) > peak["n"]:
                    peak["census"] = census(skip)
                    peak["n"] = peak["census"][0]

        sampler = asyncio.create_task(sample())
        await asyncio.gather(
            *(one_session(Path(tmp), i, rounds, keep, latency) for i in range(sessions))
        )
        stop.set()
        await sampler
        gc.collect()
        show("at the peak (calls in flight)", peak["census"], sessions)
        show("after the run (finished sessions)", census(skip), sessions)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    logging.getLogger("ctxmw").setLevel(logging.ERROR)
    asyncio.run(main(args.sessions, args.rounds, args.latency))
