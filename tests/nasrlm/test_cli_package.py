"""The package ``nasrlm.cli``: modules of at most 500 lines, argparse through its public API only, and each
command's arguments added when it is chosen (so ``nasrlm --help`` stays light)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from nasrlm.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
NASRLM = REPO / "nasrlm"
#: The most lines a module of nasrlm/cli/ may have (a new command group gets a module of its own).
MAX_LINES = 500


def test_no_cli_module_exceeds_500_lines() -> None:
    modules = sorted((NASRLM / "cli").rglob("*.py"))
    assert len(modules) > 1
    long = {m.name: n for m in modules if (n := len(m.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules of nasrlm/cli/ over {MAX_LINES} lines: {long}"


def test_no_module_uses_private_argparse_names() -> None:
    private = re.compile(r"\bargparse\._\w")
    found = [f"{path.relative_to(REPO)}:{k}" for path in sorted(NASRLM.rglob("*.py"))
             for k, line in enumerate(path.read_text().splitlines(), 1) if private.search(line)]
    assert not found, f"private argparse names (argparse._...) in {', '.join(found)}"


def test_a_command_gets_its_arguments_when_chosen_once_per_parser() -> None:
    parser = build_parser()
    assert parser.parse_args(["spaces"]).json is False
    assert parser.parse_args(["spaces", "--json"]).json is True  # defined once: no conflicting --json
    args = build_parser().parse_args(["train", "--data", "t.csv", "-o", "model"])
    assert (args.command, args.prior, args.func.__self__.name) == ("train", "auto", "train")


def test_help_imports_no_command_s_dependencies() -> None:
    script = ("import sys\nfrom nasrlm.cli import main\n"
              "for argv in (['--help'], ['spaces', '--help']):\n"
              "    try:\n        main(argv)\n    except SystemExit as done:\n        assert done.code == 0\n"
              "print(sorted(m for m in ('torch', 'optuna', 'scipy', 'sqlalchemy') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                          check=True)
    assert done.stdout.splitlines()[-1] == "[]", done.stdout
