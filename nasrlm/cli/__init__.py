"""The ``nasrlm`` command line: spaces, objectives, export, measure, data, train, predict, eval, search, demo.

Bad input (unknown space, malformed id, unknown objective, missing file) prints one line on
stderr and exits with status 2; anything else that goes wrong is a bug and keeps its traceback.

Each command is a :class:`Command`: its arguments (``add_arguments``) beside what it does (``run``);
:data:`COMMANDS` lists them in the order of ``nasrlm --help``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from nasrlm import __version__
from nasrlm.cli._common import PLUGINS_ENV, USAGE_ERROR, CliError, Command, _apply_label_options
from nasrlm.cli._plot import Plot
from nasrlm.cli._plugins import load_plugins
from nasrlm.cli._predict import Eval, Predict
from nasrlm.cli._pretrain import Pretrain
from nasrlm.cli._search import Demo, Search
from nasrlm.cli._spaces import Data, Export, Measure, Objectives, Spaces
from nasrlm.cli._train import Fit, Train
from nasrlm.errors import NasrlmError

__all__ = ["COMMANDS", "INTERRUPTED", "PLUGINS_ENV", "USAGE_ERROR", "CliError", "Command", "build_parser",
           "load_plugins", "main"]


# --- parser ---------------------------------------------------------------------------------------
class _CommandParser(argparse.ArgumentParser):
    """The parser of one command of :data:`COMMANDS`. ``nasrlm --help`` lists every command by its name
    and help alone; a command's arguments are added when it is chosen, the first time its parser parses
    (argparse hands it what follows the command's name), so that ``nasrlm spaces`` never imports what
    the options of ``train`` need."""

    def __init__(self, *args: Any, command: Command | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pending = command  # the command whose arguments are still to add

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        if self.pending is not None:
            command, self.pending = self.pending, None
            command.add_arguments(self)
        return super().parse_known_args(args, namespace)


#: The commands, in the order ``nasrlm --help`` lists them.
COMMANDS: tuple[Command, ...] = (Spaces(), Export(), Measure(), Data(), Train(), Fit(), Pretrain(), Predict(),
                                 Eval(), Objectives(), Search(), Demo(), Plot())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nasrlm", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"nasrlm {__version__}")
    plugin_help = ("import this module or .py file first, so the search spaces it registers exist "
                   f"(repeatable; also ${PLUGINS_ENV}, comma-separated)")
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE|FILE.py", help=plugin_help)
    # the same option after the command (`nasrlm search --plugin my.py ...`), collected separately
    # because a subparser's default would overwrite what was given before the command
    plugins = argparse.ArgumentParser(add_help=False)
    plugins.add_argument("--plugin", action="append", default=[], dest="command_plugins",
                         metavar="MODULE|FILE.py", help=plugin_help)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_CommandParser)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, parents=[plugins], command=command)
        p.set_defaults(func=command.run)
    return parser


#: Exit status after ctrl-C (128 + SIGINT, as a shell reports it).
INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; bad input is one line on stderr and exit status 2, as argparse does for usage.

    Only :class:`~nasrlm.errors.NasrlmError` is bad input: every command checks what the user gave
    (options, files, URLs) and raises one naming it. Any other exception is a bug and keeps its
    traceback, so that it is reported instead of hidden behind a line that blames the user.
    """
    args = build_parser().parse_args(argv)
    try:
        load_plugins([*os.environ.get(PLUGINS_ENV, "").split(","), *args.plugin, *args.command_plugins])
        _apply_label_options(args)
        return args.func(args)
    except NasrlmError as error:
        message = " ".join(str(error).split())  # one line, whatever the message held
        print(f"nasrlm: error: {message}", file=sys.stderr)
        return USAGE_ERROR
    except BrokenPipeError:  # e.g. `nasrlm export ... | head`
        return 0
    except KeyboardInterrupt as interrupt:  # ctrl-C: one line, no traceback, the shell's status for SIGINT
        print(f"nasrlm: {interrupt.args[0] if interrupt.args else 'interrupted'}", file=sys.stderr)
        return INTERRUPTED
