"""The ctxmw error tree.

Every error ctxmw raises on its own account derives from :class:`CtxmwError`::

    CtxmwError
    ├── UsageError                 the caller asked for something ctxmw cannot do
    │   ├── SettingsError          a setting (argument or CTXMW_* variable) is invalid
    │   ├── UnknownStrategyError   a strategy name is not registered
    │   ├── InvalidTranscriptError the messages break the tool-call wire rules
    │   ├── InvalidSaveFileError   the save_file path cannot hold a transcript (a folder,
    │   │                          a file ctxmw did not write, a folder that cannot be made)
    │   └── ContextOverflowError   a required segment does not fit the token budget
    └── CtxmwRuntimeError          something went wrong while doing valid work
        ├── StrategyError          a strategy raised; the original is chained (and,
        │                          for ctxmw's own errors, caught by their class too)
        ├── MaxRoundsExceeded      the tool loop hit max_rounds
        ├── SaveFileBusy           another writer holds the save_file
        ├── SaveFileWriteError     the save_file could not be written (disk full, ...)
        ├── CompactionLossError    compaction would have lost a durable line
        └── NotesFull              a note would take a conversation's (or its scope's)
                                   waiting notes past their bound (ctxmw.state)

    Aborted                        control flow, not an error: an ``abort`` file
                                   in the inbox asked the agent to stop

litellm's own exceptions are never wrapped: they reach the caller unchanged.
"""

from __future__ import annotations

import difflib

__all__ = [
    "Aborted",
    "CompactionLossError",
    "ContextOverflowError",
    "CtxmwError",
    "CtxmwRuntimeError",
    "InvalidSaveFileError",
    "InvalidTranscriptError",
    "MaxRoundsExceeded",
    "NotesFull",
    "SaveFileBusy",
    "SaveFileWriteError",
    "SettingsError",
    "StrategyError",
    "UnknownStrategyError",
    "UsageError",
]


class CtxmwError(Exception):
    """Base of every error ctxmw raises on its own account."""


class UsageError(CtxmwError, ValueError):
    """The caller asked for something ctxmw cannot do; fix the call."""


class SettingsError(UsageError):
    """A setting, given as an argument or a ``CTXMW_*`` variable, is invalid."""


class UnknownStrategyError(UsageError, LookupError):
    """A prompt strategy name is not registered.

    Attributes:
        name: the name that was asked for.
        registered: every name that is registered, sorted.
        source: where the name came from (the ``prompt_strategies`` argument, the
            ``CTXMW_PROMPT_STRATEGIES`` variable, a request's ``metadata["ctxmw"]``...).
    """

    def __init__(
        self, name: str, registered: list[str], source: str = "the prompt_strategies argument"
    ) -> None:
        self.name = name
        self.registered = registered
        self.source = source
        valid = sorted([*registered, "none"])
        close = difflib.get_close_matches(name, valid, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        super().__init__(
            f"Unknown prompt strategy {name!r} in {source}.{hint} The valid names are: "
            f"{', '.join(valid)}. Register your own with @ctxmw.register_strategy(name) or pass "
            "a callable."
        )

    def named_from(self, source: str) -> UnknownStrategyError:
        """The same error, naming ``source`` as where the name came from."""
        return UnknownStrategyError(self.name, self.registered, source)


class InvalidTranscriptError(UsageError):
    """The messages break the tool-call wire rules.

    Attributes:
        index: position of the first offending message.
    """

    def __init__(self, message: str, index: int) -> None:
        self.index = index
        super().__init__(f"Invalid transcript at message {index}: {message}")


class InvalidSaveFileError(UsageError):
    """The save_file path cannot hold a transcript; nothing was written or left beside it.

    Attributes:
        save_file: the path as given.
        problem: what is wrong with it.
    """

    def __init__(self, save_file: str, problem: str, remedy: str) -> None:
        self.save_file = save_file
        self.problem = problem
        super().__init__(
            f"The save_file {save_file!r} cannot hold a transcript: {problem}. {remedy} "
            "Nothing was written."
        )


class ContextOverflowError(UsageError):
    """A required segment (system or query) does not fit the token budget; it is never dropped.

    Attributes:
        kind: the kind of the segment that did not fit.
        needed: tokens the required segments need together.
        budget: the token budget that was given.
    """

    def __init__(self, kind: str, needed: int, budget: int) -> None:
        self.kind = kind
        self.needed = needed
        self.budget = budget
        super().__init__(
            f"The required {kind!r} segment does not fit the token budget: the required "
            f"segments need {needed} tokens, the budget is {budget}. Required segments (system "
            "and query) are never dropped; raise budget_tokens or shorten them."
        )


class CtxmwRuntimeError(CtxmwError, RuntimeError):
    """Something went wrong while doing valid work."""


class StrategyError(CtxmwRuntimeError):
    """A prompt strategy raised; the original exception is chained as ``__cause__``.

    When the original is one of ctxmw's own errors (a strategy raising
    :class:`CompactionLossError`, :class:`ContextOverflowError`, a :class:`UsageError`...),
    :meth:`wrap` returns an instance of both classes, so ``except CompactionLossError`` and
    ``except StrategyError`` both catch it, and the original's attributes (``missing``,
    ``needed``, ``index``...) are on it.

    Attributes:
        strategy: the name of the strategy that failed.
    """

    def __init__(self, strategy: str, original: BaseException) -> None:
        self.strategy = strategy
        # Not super(): in a carrier class the next __init__ would be the original's.
        Exception.__init__(
            self, f"Prompt strategy {strategy!r} failed: {type(original).__name__}: {original}"
        )

    @classmethod
    def wrap(cls, strategy: str, original: BaseException) -> StrategyError:
        """The error to raise (``from original``) when ``strategy`` raised ``original``."""
        if not isinstance(original, CtxmwError) or isinstance(original, StrategyError):
            return cls(strategy, original)
        kind = _carrier(type(original))
        error = kind.__new__(kind)
        vars(error).update(vars(original))
        StrategyError.__init__(error, strategy, original)
        return error


_carriers: dict[type[CtxmwError], type[StrategyError]] = {}


def _carrier(kind: type[CtxmwError]) -> type[StrategyError]:
    """``StrategyError`` and ``kind`` in one class (one per error class, made once)."""
    if kind not in _carriers:
        name = f"StrategyError[{kind.__name__}]"
        _carriers[kind] = type(name, (StrategyError, kind), {"__module__": __name__})
    return _carriers[kind]


class MaxRoundsExceeded(CtxmwRuntimeError):
    """The tool loop reached ``max_rounds`` without a final answer.

    Every completed round is already in the transcript; resume from it.

    Attributes:
        max_rounds: the bound that was reached.
        save_file: the transcript to resume from, or None when the call had none.
    """

    def __init__(self, max_rounds: int, save_file: str | None) -> None:
        self.max_rounds = max_rounds
        self.save_file = save_file
        where = (
            f"every completed round is saved in {save_file!r}; resume from it with "
            "ctxmw.Session(model, save_file=...).run() or ask() a follow-up"
            if save_file is not None
            else "no save_file was given, so pass one to keep the transcript between calls"
        )
        super().__init__(
            f"The tool loop made {max_rounds} model calls without a final answer "
            f"(max_rounds={max_rounds}); {where}, or raise max_rounds (CTXMW_MAX_ROUNDS)."
        )


class SaveFileBusy(CtxmwRuntimeError):
    """Another writer holds the lock on this save_file.

    Attributes:
        save_file: the transcript that is busy.
        lock_file: the lock file that holds it.
        holder: the process id written in the lock file, when readable.
    """

    def __init__(self, save_file: str, lock_file: str, holder: int | None) -> None:
        self.save_file = save_file
        self.lock_file = lock_file
        self.holder = holder
        who = f"process {holder}" if holder is not None else "another writer"
        super().__init__(
            f"The save_file {save_file!r} is in use by {who} (lock file {lock_file!r}); two "
            "writers on one transcript are refused. Wait for it to finish, use another "
            "save_file, or delete the lock file if that process is gone."
        )


class SaveFileWriteError(CtxmwRuntimeError):
    """A file of the conversation could not be written (disk full, permissions); the OSError is
    chained.

    The save_file: nothing of the failed write stays in the file, and what the call made is kept
    in memory for the save_file. A :class:`~ctxmw.Session` keeps the round (``Session.messages``)
    and its next successful write saves it. A stateless call (``ctxmw.acompletion``, a
    framework) gets the answer it paid for as :attr:`response`: continue the conversation with
    it, or repeat the call, which then returns the same answer without calling the model; either
    way that next call with the same save_file saves it. An offload record
    (``what="offload record"``): no record and no temporary file is left, and the prompt that
    would have named it is not sent; the turn's input waits in ``Session.pending_input``.

    Attributes:
        save_file: the file that could not be written (the save_file, or the offload record).
        what: ``"save_file"`` or ``"offload record"``.
        errno: the operating system's error number, when known.
        response: the model's answer the failed write would have saved (a stateless call's last
            round), else None.
    """

    def __init__(
        self,
        save_file: str,
        error: OSError,
        *,
        what: str = "save_file",
        stateless: bool = False,
        response: object = None,
    ) -> None:
        self.save_file = save_file
        self.what = what
        self.errno = error.errno
        self.response = response
        reason = error.strerror or type(error).__name__
        if what != "save_file":
            kept = (
                "Nothing was stored and no half-written file is left; the prompt that would "
                "name it was not sent: free disk space or fix the folder's permissions, then "
                "call run() on the session (or repeat the call) to send the turn."
            )
        elif not stateless:
            kept = (
                "The round is kept in memory and nothing half-written is left in the file: free "
                "disk space or fix the file's permissions, then call run() on the session to "
                "save it."
            )
        elif response is not None:
            kept = (
                "The model's answer is not lost: it is this error's .response, and ctxmw keeps "
                "it for this save_file. Free disk space or fix the file's permissions, then "
                "continue with the answer in your messages, or repeat this call (it returns "
                "this answer again without calling the model): that call saves it."
            )
        else:
            kept = (
                "The tool rounds made so far are kept for this save_file and written by your "
                "next call with it (a repeated call runs their tools again): free disk space or "
                "fix the file's permissions first."
            )
        super().__init__(
            f"Could not write the {what} {save_file!r}: {reason} (errno {error.errno}). {kept}"
        )

    def for_caller(self, response: object) -> SaveFileWriteError:
        """This error as a stateless caller gets it: ``response`` is the answer it kept."""
        cause = self.__cause__
        error = cause if isinstance(cause, OSError) else OSError(self.errno, "write failed")
        return SaveFileWriteError(self.save_file, error, stateless=True, response=response)


class CompactionLossError(CtxmwRuntimeError):
    """Compaction would have sent a prompt missing durable items, so it refused.

    Raised only when the ``compact_on_loss`` setting is ``"raise"``; with ``"fallback"`` the
    uncompacted prompt is sent instead and a warning is logged.

    Attributes:
        strategy: the strategy that refused.
        missing: the durable items that would not have appeared literally in the prompt (kept
            out of the message: they are conversation content, and error texts reach logs).
    """

    def __init__(self, strategy: str, missing: list[str]) -> None:
        self.strategy = strategy
        self.missing = missing
        super().__init__(
            f"Strategy {strategy!r} refused to send a lossy prompt: {len(missing)} durable "
            "item(s) would not appear literally in it (see .missing). Adjust durable_patterns "
            "(a pattern spanning lines cannot be kept line by line), raise compact_keep_recent, "
            "or set compact_on_loss='fallback' to send the uncompacted prompt instead."
        )


class NotesFull(CtxmwRuntimeError):
    """A note was refused: the conversation's waiting notes (or its scope's) are at their bound.

    Attributes:
        conversation: the conversation the note was for.
        limit: the bound that refused it (``conversation_notes``, ``conversation_note_bytes``,
            ``scope_note_bytes``, or ``memory_state_bytes``).
        allowed: the bound's value.
        held: what is waiting now (notes, or bytes of their texts).
    """

    def __init__(self, conversation: str, limit: str, allowed: int, held: int) -> None:
        self.conversation, self.limit, self.allowed, self.held = conversation, limit, allowed, held
        unit = "notes" if limit == "conversation_notes" else "bytes of notes"
        super().__init__(
            f"The note for {conversation!r} was refused: {held} {unit} wait already and the "
            f"{limit} limit is {allowed}. Wait until the conversation's next requests deliver "
            f"them (or until they expire), or raise the bound (ctxmw.limits.{limit} in a proxy's "
            "config)."
        )


# A signal, not an error: the name says what happened (hence no -Error suffix).
class Aborted(Exception):
    """An ``abort`` file in the inbox asked the running agent to stop.

    Not part of the :class:`CtxmwError` tree: catching ``CtxmwError`` never swallows it.

    Attributes:
        reason: the stripped content of the abort file, or a default naming the file.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)
