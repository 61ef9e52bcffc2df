"""User-style code against the inbox API; mypy --strict checks it (it is never run)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import ctxmw
from ctxmw.inbox import InboxEntry


async def operator(save_file: Path) -> list[str]:
    sent: Path = await ctxmw.inbox.deliver(save_file, "Focus on the failing test.", name="hint")
    stop: Path = await ctxmw.inbox.abort(str(save_file), "Budget reached.")
    entries: list[InboxEntry] = await ctxmw.inbox.list_inbox(save_file)
    times: list[datetime] = [entry.written for entry in entries if not entry.delivered]
    folders = (ctxmw.inbox.inbox_dir(save_file), ctxmw.inbox.inbox_removed_dir(save_file))
    return [str(sent), str(stop), *map(str, folders), *(t.isoformat() for t in times)]


async def agent(save_file: Path) -> str | None:
    history: ctxmw.Messages = [{"role": "user", "content": "Fix the build."}]
    try:
        prompt = await ctxmw.prepare_prompt(history, save_file=save_file)
    except ctxmw.Aborted as stop:
        return stop.reason
    return str(prompt[-1]["content"])
