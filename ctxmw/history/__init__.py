"""What changed since the previous call: the one place ctxmw computes it.

Every call of a conversation is mostly the previous call plus a few new messages. The parts of
ctxmw that derive something from a call's lists (the strategies' caches, the telemetry's
digests) only redo the work for what is new, and they learn what is new here:

- :class:`History` (``_history``): the conversation's input to its strategy chain. The chain
  hands it each call's input; it compares it with the previous call's once and keeps the
  answer (the input as dicts, the previous input, how many messages are unchanged, how many are
  the very same objects, a revision). A conversation whose list only grew says so
  (:meth:`History.grows`) and nothing is compared.
- :func:`keep` and :func:`resume` (``_kept``): a strategy keeps what it derived beside the
  input it derived it from and, on the next call, resumes from the first message that changed,
  taken from the History when it reads the chain's input, compared otherwise. Built on them:
  one value per message (:func:`kept_per_message`), the indices of the messages that pass a
  test (:func:`kept_indices`), a value kept while a prefix is unchanged
  (:func:`kept_while_unchanged`).
- :class:`DigestSlots` (``_facts``): per-message facts (digest, system role, cache mark) of
  each list a call is made of (the transcript, each strategy's output, the payload), computed
  for the messages whose object changed since the same list of the previous call; and
  :class:`Extension`, whether a list still extends the previous call's, digesting only the
  positions whose object changed.
- :func:`compare_prefix` and :func:`identical_prefix` (``_compare``): where two lists stop
  agreeing (equal, or the same objects), at C speed. Everything above compares through them.
"""

from ctxmw.history._compare import compare_prefix, identical_prefix
from ctxmw.history._facts import DigestSlots, Extension, SlotView
from ctxmw.history._history import MAX_MEMO_MESSAGES, History, answer, as_dicts, history_of
from ctxmw.history._kept import (
    Kept,
    common_prefix,
    keep,
    kept_copy,
    kept_indices,
    kept_per_message,
    kept_while_unchanged,
    resume,
    resume_point,
    same_prefix,
)

__all__ = [
    "MAX_MEMO_MESSAGES",
    "DigestSlots",
    "Extension",
    "History",
    "Kept",
    "SlotView",
    "answer",
    "as_dicts",
    "common_prefix",
    "compare_prefix",
    "history_of",
    "identical_prefix",
    "keep",
    "kept_copy",
    "kept_indices",
    "kept_per_message",
    "kept_while_unchanged",
    "resume",
    "resume_point",
    "same_prefix",
]
