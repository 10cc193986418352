"""mydb-operator: run the operator, or show what it would apply for a MyDatabase file.

Each concern of the command line is a module of commands/: arguments.py parses,
settings.py turns the flags and the environment into one Config (the only place
either is read), and the command runs with it (run.py; render.py for render and
values)."""

from __future__ import annotations

import os
from collections.abc import Callable

from .commands.arguments import build_parser
from .commands.render import print_manifests, print_values
from .commands.run import run_operator
from .commands.settings import load
from .config import Config, SettingError

__all__ = ["build_parser", "main"]

COMMANDS: dict[str, Callable[[Config], None]] = {
    "run": run_operator,
    "render": print_manifests,
    "values": print_values,
}


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        config = load(args, os.environ)
    except SettingError as error:
        raise SystemExit(f"mydb-operator: {error}") from None
    COMMANDS[config.command](config)


if __name__ == "__main__":
    main()
