"""The fleet tests' processes: a loopback upstream, LiteLLM Proxy replicas, their config.

- :class:`Upstream`: an OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 (a thread of
  the test process) that records every request body and reports usage the way a prefix cache
  does: ``prompt_tokens_details.cached_tokens`` is the longest message prefix it served before
  (about four bytes a token). ``hold()`` makes the next request wait until ``release()``.
- :class:`Replica`: ``litellm --config <file> --port <p>`` in its own process, killed or
  stopped by the test.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests._fleet_convo import chat_completion
from tests._redis import free_port

__all__ = ["MASTER_KEY", "TENANT_KEYS", "Replica", "Upstream", "reply", "write_config"]

MASTER_KEY = "sk-ctxmw-fleet-test-4f1c9b"  # 1.110 refuses no key and the well-known sk-1234


class Upstream:
    """See the module docstring."""

    def __init__(self, *, cache_figures: bool = True) -> None:
        self.cache_figures = cache_figures
        self.requests: list[dict[str, Any]] = []
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()
        self._hold = threading.Event()
        self.held = threading.Event()
        self._release = threading.Event()
        handler = _handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def api_base(self) -> str:
        """The ``api_base`` the proxy's deployment uses."""
        return f"http://127.0.0.1:{self.port}/v1"

    def hold(self) -> None:
        """The next request waits (``held`` is set once it arrives) until :meth:`release`."""
        self._release.clear()
        self.held.clear()
        self._hold.set()

    def release(self) -> None:
        """Let a held request answer."""
        self._release.set()

    def stop(self) -> None:
        """Stop serving."""
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """Record one request and build its response (cached tokens from earlier prefixes)."""
        messages = body.get("messages") or []
        with self._lock:
            self.requests.append(body)
            reply_id = f"chatcmpl-{len(self.requests)}"  # names this request: requests[n - 1]
            hold = self._hold.is_set()
            self._hold.clear()
            prompt, cached, digest = 0, 0, hashlib.sha256()
            prefix_known = True
            for message in messages:
                raw = json.dumps(message, sort_keys=True).encode()
                digest.update(raw)
                tokens = max(len(raw) // 4, 1)
                prompt += tokens
                key = digest.digest()
                if prefix_known and key in self._seen:
                    cached += tokens
                else:
                    prefix_known = False
                self._seen.add(key)
        if hold:
            self.held.set()
            self._release.wait(timeout=120)
        answer = chat_completion(
            prompt, cached, reply_id=reply_id, model=body.get("model", "fake-model")
        )
        if not self.cache_figures:  # most self-hosted servers report no cache reads at all
            del answer["usage"]["prompt_tokens_details"]
        return answer


def _handler(upstream: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            answer = upstream.answer(body)
            kind = "application/json"
            if body.get("stream"):
                out, kind = _sse(answer), "text/event-stream"
            else:
                out = json.dumps(answer).encode()
            reply(self, out, kind)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def reply(handler: BaseHTTPRequestHandler, out: bytes, kind: str, status: int = 200) -> None:
    """Answer a loopback upstream's request: ``status``, with ``out`` of content type ``kind``."""
    try:
        handler.send_response(status)
        handler.send_header("content-type", kind)
        handler.send_header("content-length", str(len(out)))
        handler.end_headers()
        handler.wfile.write(out)
    except OSError:
        pass  # the proxy that asked is gone (killed, or it gave up)


def _sse(answer: dict[str, Any]) -> bytes:
    """The answer as an OpenAI stream: one content chunk, then one carrying only the usage."""
    head = {k: answer[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    delta = {"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}
    last = {"index": 0, "delta": {}, "finish_reason": "stop"}
    chunks = [
        {**head, "choices": [delta]},
        {**head, "choices": [last]},
        {**head, "choices": [], "usage": answer["usage"]},
    ]
    return (
        b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    )


def write_config(
    path: Path,
    upstream: Upstream,
    redis_port: int | None,
    *,
    settings: dict[str, Any],
    ledger: str | None = None,
    callbacks: bool = True,
    section: dict[str, Any] | None = None,
    tenants: bool = False,
) -> Path:
    """A proxy config: one model group ``agent`` on the upstream, ctxmw on the proxy's Redis.

    ``section`` adds keys to the ``ctxmw:`` section; ``tenants`` authenticates requests with
    :data:`TENANT_AUTH` (written beside the config), which gives :data:`TENANT_KEYS` the
    identities two virtual keys of two teams have.
    """
    config: dict[str, Any] = {
        "model_list": [
            {
                "model_name": "agent",
                "litellm_params": {
                    "model": "openai/fake-model",
                    "api_base": upstream.api_base,
                    "api_key": "upstream-needs-no-key",
                },
            }
        ],
        "general_settings": {"master_key": MASTER_KEY},
    }
    if callbacks:
        ctxmw: dict[str, Any] = {"settings": settings, "replica": "os.environ/CTXMW_TEST_REPLICA"}
        if redis_port is not None:
            ctxmw["state"] = "redis"
            config["router_settings"] = {"redis_host": "127.0.0.1", "redis_port": redis_port}
        if ledger is not None:
            ctxmw["ledger"] = ledger
        ctxmw.update(section or {})
        config["litellm_settings"] = {"callbacks": ["ctxmw.proxy.hook", "prometheus"]}
        config["ctxmw"] = ctxmw
    if tenants:
        (path.parent / "tenant_auth.py").write_text(TENANT_AUTH, encoding="utf-8")
        config["general_settings"]["custom_auth"] = "tenant_auth.user_api_key_auth"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


TENANT_KEYS = {"team-a": "sk-tenant-a-0d1e", "team-b": "sk-tenant-b-7c2f"}
"""Two keys of two teams (see :data:`TENANT_AUTH`)."""

# Virtual keys live in the proxy's database, which needs Prisma and its engines (downloaded when
# the client is generated, which a machine without network cannot do). The proxy's custom_auth
# hook returns the same UserAPIKeyAuth a virtual key of a team yields: its hashed token, its
# alias and its team; the master key stays the proxy admin's.
TENANT_AUTH = f"""
import hashlib

from fastapi import HTTPException
from litellm.proxy._types import LitellmUserRoles, UserAPIKeyAuth

TEAMS = {{key: team for team, key in {TENANT_KEYS!r}.items()}}


async def user_api_key_auth(request, api_key):
    key = api_key.removeprefix("Bearer ").strip()
    token = hashlib.sha256(key.encode()).hexdigest()
    if key == {MASTER_KEY!r}:
        return UserAPIKeyAuth(
            api_key=key, token=token, user_id="admin", user_role=LitellmUserRoles.PROXY_ADMIN
        )
    if key in TEAMS:
        return UserAPIKeyAuth(
            api_key=key, token=token, key_alias=TEAMS[key] + "-key", team_id=TEAMS[key]
        )
    raise HTTPException(status_code=401, detail="unknown key")
"""


def litellm_binary() -> str:
    """The ``litellm`` command of this environment."""
    return str(Path(sys.executable).with_name("litellm"))


class Replica:
    """One ``litellm --config`` process on a loopback port."""

    def __init__(
        self,
        config: Path,
        name: str,
        log: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.config, self.name, self.log_path = config, name, log
        self.env, self.cwd = env or {}, cwd
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Replica:
        """Start the process (see :meth:`wait`)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXMW_", "REDIS_"))}
        env |= {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "CTXMW_TEST_REPLICA": self.name}
        env |= {"LITELLM_LOG": "INFO", "NO_DOCS": "True", **self.env}
        log = self.log_path.open("ab")
        cmd = [litellm_binary(), "--config", str(self.config), "--host", "127.0.0.1"]
        self._proc = subprocess.Popen(
            [*cmd, "--port", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.cwd,
        )
        log.close()
        return self

    def wait(self, tries: int = 600) -> Replica:
        """Wait until the proxy answers its liveness route (a bound on tries, not on time)."""
        for _ in range(tries):
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited; see {self.log_path}:\n{self.log()[-3000:]}"
                )
            try:
                if httpx.get(f"{self.url}/health/liveliness", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{self.name} did not start; see {self.log_path}")

    def log(self) -> str:
        """Everything the process printed."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait()

    def stop(self) -> None:
        """Terminate, then kill if it lingers."""
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()

    def chat(
        self, messages: list[dict[str, Any]], session: str, key: str = MASTER_KEY, **extra: Any
    ) -> httpx.Response:
        """One chat request for ``session``, with ``key``."""
        body = {"model": "agent", "messages": messages, "litellm_session_id": session, **extra}
        return httpx.post(
            f"{self.url}/v1/chat/completions", json=body, headers=_auth(key), timeout=120
        )

    def note(
        self, session: str, text: str, key: str = MASTER_KEY, kind: str = "inbox"
    ) -> httpx.Response:
        """Post an inbox note (``kind="abort"``: an abort with ``text`` as its reason)."""
        body = {"text": text} if kind == "inbox" else {"reason": text}
        url = f"{self.url}/ctxmw/{kind}/{session}"
        return httpx.post(url, json=body, headers=_auth(key), timeout=120)


def _auth(key: str = MASTER_KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
