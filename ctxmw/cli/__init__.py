"""The ``ctxmw`` command line. It holds no logic a library user could not call from Python."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable, Sequence
from typing import cast

from ctxmw import __version__, list_strategies
from ctxmw.cli._args import Parser, positive_int, run_command, strategies_from
from ctxmw.cli.inbox import add_inbox_commands
from ctxmw.cli.replay import add_replay_command
from ctxmw.cli.show import add_show_command
from ctxmw.cli.stats import add_stats_command

__all__ = ["main"]

Handler = Callable[[argparse.Namespace], int]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ctxmw`` command; returns the process exit code.

    Exit codes: 0 success, 2 a usage error (arguments, settings, input files), 1 any other
    failure; each failure is one line on stderr.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    return run_command(args.command, handler, args)


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="ctxmw", description="Prompt strategies between async agents and LiteLLM.")
    parser.add_argument("--version", action="version", version=f"ctxmw {__version__}")
    # Parser's subcommands are Parsers too (argparse uses the parent's class); the adders
    # only need ArgumentParser.
    sub = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(title="commands", metavar="COMMAND"),
    )
    _add(sub, "strategies", "list every registered prompt strategy", _cmd_strategies)
    demo = _add(sub, "demo", "run the offline demo (no API key, no network)", _cmd_demo)
    demo.add_argument("--out", default="ctxmw-demo", help="output folder (default: ctxmw-demo)")
    demo.add_argument(
        "--calls", type=positive_int, default=240, help="tool calls in the scripted plan"
    )
    demo.add_argument(
        "--strategies",
        action="append",
        help="a strategy list to compare (repeatable; default: none, shorten_tools_economic, "
        "shorten_tools, "
        "shorten_tools_epoch, shorten_tools_epoch_increment, clear_tool_results)",
    )
    demo.add_argument("--model", help="run against a real provider: the litellm model name")
    demo.add_argument("--api-base", help="run against a real OpenAI-compatible endpoint")
    demo.add_argument("--api-key", help="the API key for --model / --api-base")
    add_inbox_commands(sub, _add)
    add_stats_command(sub, _add)
    add_show_command(sub, _add)
    add_replay_command(sub, _add)
    return parser


def _add(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help_text: str,
    handler: Handler,
) -> argparse.ArgumentParser:
    cmd = sub.add_parser(name, help=help_text, description=help_text)
    cmd.set_defaults(handler=handler, command=name)
    return cmd


def _cmd_strategies(args: argparse.Namespace) -> int:
    infos = list_strategies()
    width = max((len(info.name) for info in infos), default=0)
    for info in infos:
        text = f"{info.name:<{width}}  {info.description}"
        print(textwrap.fill(text, 120, subsequent_indent=" " * (width + 2)))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from ctxmw.demo._cli import run_demo_command

    with strategies_from("--strategies"):
        return run_demo_command(args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
