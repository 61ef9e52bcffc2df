"""The command line's one error path, and the argument checks every command shares.

Every command runs through :func:`run_command`: a usage error (bad arguments, settings, input
files) is one line on stderr and exit code 2; any other failure is one line and exit code 1; a
reader that closes the pipe early (``ctxmw show ... | head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeAlias

from ctxmw.errors import UnknownStrategyError, UsageError
from ctxmw.strategies._chain import ARGUMENT

__all__ = [
    "Handler",
    "Parser",
    "check_folder_of",
    "positive_int",
    "run_command",
    "strategies_from",
]

Handler: TypeAlias = Callable[[argparse.Namespace], int]
"""A command: the parsed arguments in, the exit code out."""
if TYPE_CHECKING:  # argparse's generic is not subscriptable at runtime
    SubParsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
    Adder: TypeAlias = Callable[[SubParsers, str, str, Handler], argparse.ArgumentParser]


class Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line: ``ctxmw replay: argument --window: ...``."""

    def error(self, message: str) -> NoReturn:
        """Print one line naming the command and exit with 2."""
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 or str(value) != text.strip().lstrip("+"):
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


@contextlib.contextmanager
def strategies_from(option: str) -> Iterator[None]:
    """An unknown strategy name in the lists an option gave names that option, not an argument
    the user never wrote (a name read from ``CTXMW_PROMPT_STRATEGIES`` still names the variable).
    """
    try:
        yield
    except UnknownStrategyError as exc:
        if exc.source != ARGUMENT:
            raise
        raise exc.named_from(f"the {option} option") from None


def check_folder_of(path: str, option: str) -> None:
    """An output file's folder must exist before hours of work are spent on what goes in it.

    Raises:
        UsageError: the folder is missing or is not a folder.
    """
    folder = Path(path).parent
    if not folder.is_dir():
        raise UsageError(
            f"{option} {path!r}: the folder {str(folder)!r} does not exist; create it or "
            "choose another path."
        )


def run_command(name: str, handler: Handler, args: argparse.Namespace) -> int:
    """Run one command's handler; every failure becomes one stderr line and an exit code."""
    try:
        return handler(args)
    except BrokenPipeError:
        _quiet_stdout()
        return 1
    except KeyboardInterrupt:
        print(f"ctxmw {name}: interrupted.", file=sys.stderr)
        return 130
    except Exception as exc:  # the CLI's promise: one line, never a traceback
        error = _leaf(exc)
        usage = isinstance(error, UsageError)
        kind = "" if usage or isinstance(error, OSError) else f"{type(error).__name__}: "
        text = " ".join(str(error).split()) or type(error).__name__
        print(f"ctxmw {name}: {kind}{text}", file=sys.stderr)
        return 2 if usage else 1


def _leaf(exc: BaseException) -> BaseException:
    """The one error inside task-group wrappers (anyio raises ExceptionGroups)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _quiet_stdout() -> None:
    # Python flushes stdout again at exit; point it at devnull so that flush cannot fail too.
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
