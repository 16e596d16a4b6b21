"""The ``consistent`` command.  Each subcommand lives in a small function registered in
``_COMMANDS``; later capabilities add theirs there."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from consistent import __version__

Handler = Callable[[argparse.Namespace], int]


def _cmd_version(_args: argparse.Namespace) -> int:
    sys.stdout.write(f"consistent {__version__}\n")
    return 0


_COMMANDS: dict[str, tuple[str, Handler, Callable[[argparse.ArgumentParser], None]]] = {
    "version": ("print the version", _cmd_version, lambda _p: None),
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="consistent",
        description="Session-consistency middleware for MySQL/MariaDB replication.",
    )
    parser.add_argument("--version", action="version", version=f"consistent {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, handler, configure) in _COMMANDS.items():
        command = sub.add_parser(name, help=help_text)
        configure(command)
        command.set_defaults(handler=handler)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    return handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
