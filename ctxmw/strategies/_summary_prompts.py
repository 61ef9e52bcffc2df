"""The texts ``summarize`` sends: the cheap mode's prompt and the aligned mode's instruction."""

from __future__ import annotations

__all__ = ["ALIGNED_MARK", "ALIGNED_PROMPT", "EARLIER", "SUMMARY_PROMPT"]

SUMMARY_PROMPT = """\
You compress the earlier part of an agent's conversation so the agent can continue its work.
Write a brief summary of the excerpt: what was asked, what was done, what was found, what is
still open. Keep every identifier (order ids, ticket and tracking numbers, file names), every
amount and every explicit decision, copied character for character. Copy every line that starts
with DECISION, OPEN or ERROR verbatim on its own line. These items must appear verbatim:
{items}
Answer with the summary only."""

ALIGNED_MARK = "[ctxmw: summary request]"
"""How the trailing instruction of an aligned summary request begins."""

ALIGNED_PROMPT = (
    ALIGNED_MARK
    + """ Pause the task and write a checkpoint summary of this conversation. Everything \
above except the last {kept} message(s) will be replaced by your summary{earlier}; those \
{kept} message(s) stay as they are. Use exactly these headings, briefly:
## Intent
what the user asked for, and what done looks like
## Decisions
every explicit decision, one per line; copy lines starting with DECISION, OPEN or ERROR verbatim
## Files
every file, path or resource touched, and what was learned about it
## Open items
what is still to do or unresolved
## Identifiers
every id, amount, tracking number and file name, copied character for character
These items must appear verbatim:
{items}
Do not call a tool. Answer with the summary only."""
)
"""The one instruction appended to the agent's prompt in ``aligned`` mode."""

EARLIER = ", including the earlier summary: carry its content forward"
