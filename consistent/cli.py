"""The ``consistent`` command.

Each subcommand is registered by a function ``add_<name>_command(subparsers)`` in the module
that implements it; the function adds its parser and stores ``handler(args) -> exit status``
as the parser's ``handler`` default.  The functions are entry points of the group
``consistent.commands`` (``[project.entry-points."consistent.commands"]`` in pyproject.toml),
found through :mod:`importlib.metadata`, so that the command imports only the module of the
chosen subcommand (PySpark, for one, is slow to import).  ``_SUMMARIES`` holds the one-line
help of the subcommands this distribution ships, for ``consistent --help`` to list them
without importing any.  A subcommand whose entry point is not installed (a checkout whose
installed metadata predates it) is an error that says how to reinstall, never a silent
fallback.  Every subcommand runs through :func:`consistent.command.run`: a failure is one line
on standard error (``consistent <command>: error: …``), Ctrl-C exits with status 130.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Final

from consistent import __version__
from consistent.command import EXIT_FAILURE, EXIT_USAGE, CommandError, CommandParser, run

Handler = Callable[[argparse.Namespace], int]

#: The entry-point group of the subcommands.
GROUP: Final = "consistent.commands"

#: name -> one-line help, for the subcommands of pyproject.toml's entry-point group.
_SUMMARIES: Final[Mapping[str, str]] = {
    "emulate": "run an emulated MySQL replication topology on 127.0.0.1",
    "proxy": "run the MySQL-protocol proxy (read/write splitting with session consistency)",
    "lag-sample": "poll replicas for replication lag and write lag records to the trace stream",
    "analyze": "run the Spark staleness analysis over trace files and write the report",
    "demo": "run the demonstration: emulated topology, proxy, workload, staleness report",
}


def _cmd_version(_args: argparse.Namespace) -> int:
    sys.stdout.write(f"consistent {__version__}\n")
    return 0


def registered() -> dict[str, EntryPoint]:
    """The installed subcommands' entry points, by name (none imported)."""
    return {entry.name: entry for entry in entry_points(group=GROUP)}


def _registrar(name: str, entry: EntryPoint | None) -> Callable[[Any], argparse.ArgumentParser]:
    if entry is None:
        raise CommandError(
            f"the subcommand {name!r} has no entry point in the group {GROUP!r}: the installed "
            "metadata of 'consistent' is older than its pyproject.toml; reinstall it with "
            "`make venv` (or `pip install -e .`)",
            EXIT_FAILURE,
        )
    registrar: Callable[[Any], argparse.ArgumentParser] = entry.load()
    return registrar


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The argument parser.  Only the subcommand named in ``argv`` (if any) is imported; the
    others appear in the help with their one-line description.  Raises
    :class:`~consistent.command.CommandError` when the chosen one's entry point is missing."""
    parser = CommandParser(
        prog="consistent",
        description="Session-consistency middleware for MySQL/MariaDB replication.",
    )
    parser.add_argument("--version", action="version", version=f"consistent {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    version = sub.add_parser("version", help="print the version")
    version.set_defaults(handler=_cmd_version)
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    entries = registered()
    for name in dict.fromkeys([*_SUMMARIES, *sorted(entries)]):
        if name == chosen:
            _registrar(name, entries.get(name))(sub)
        else:
            sub.add_parser(name, help=_SUMMARIES.get(name))
    return parser


def _dispatch(options: argparse.Namespace) -> int:
    argv: list[str] = options.argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return run(f"consistent {args.command}", handler, args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    return run("consistent", _dispatch, argparse.Namespace(argv=args_list))


if __name__ == "__main__":
    raise SystemExit(main())
