"""An agent talking to a LiteLLM Proxy that runs ctxmw (examples/proxy/config.yaml).

The agent is any OpenAI client: it names its conversation with the ``x-litellm-session-id``
header (or ``litellm_session_id`` in the body), sends its whole history on every call, and
ctxmw shortens what the model sees. An operator posts a note to the conversation through the
proxy's inbox route; the next call delivers it, once, whichever replica serves it.

    PROXY_URL=http://127.0.0.1:4000 LITELLM_MASTER_KEY=sk-... python examples/proxy/agent_client.py
"""

from __future__ import annotations

import os
import uuid

import httpx
from openai import OpenAI

PROXY = os.environ.get("PROXY_URL", "http://127.0.0.1:4000")
KEY = os.environ["LITELLM_MASTER_KEY"]
SESSION = f"agent-{uuid.uuid4().hex[:8]}"


def main() -> None:
    client = OpenAI(base_url=PROXY, api_key=KEY, default_headers={"x-litellm-session-id": SESSION})
    history: list[dict[str, object]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Summarise the repository."},
    ]
    for i in range(3):
        if i == 2:  # an operator steers the running agent through the proxy
            posted = httpx.post(
                f"{PROXY}/ctxmw/inbox/{SESSION}",
                json={"text": "Focus on the failing test first."},
                headers={"Authorization": f"Bearer {KEY}"},
            )
            posted.raise_for_status()
            print("note queued:", posted.json()["seq"])
        reply = client.chat.completions.create(model="agent", messages=history)  # type: ignore[arg-type]
        answer = reply.choices[0].message.content or ""
        cached = reply.usage.prompt_tokens_details.cached_tokens if reply.usage else None
        print(f"call {i}: {len(history)} messages sent, answer {answer[:40]!r}, cached {cached}")
        history += [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": f"Continue with step {i + 2}."},
        ]
    pending = httpx.get(
        f"{PROXY}/ctxmw/inbox/{SESSION}", headers={"Authorization": f"Bearer {KEY}"}
    )
    print("notes still pending:", len(pending.json()["pending"]))


if __name__ == "__main__":
    main()
