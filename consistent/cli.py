"""The ``consistent`` command.

Each subcommand is registered by a function ``add_<name>_command(subparsers)`` in the module
that implements it; the function adds its parser and stores ``handler(args) -> exit status``
as the parser's ``handler`` default.  ``_SUBCOMMANDS`` lists them by import path so that the
command imports only what the chosen subcommand needs (PySpark, for one, is slow to import).
Every subcommand runs through :func:`consistent.command.run`: a failure is one line on
standard error (``consistent <command>: error: …``), Ctrl-C exits with status 130.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

from consistent import __version__
from consistent.command import EXIT_USAGE, CommandParser, run

Handler = Callable[[argparse.Namespace], int]

#: name -> (one-line help, "module:function" that registers the full parser)
_SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "emulate": (
        "run an emulated MySQL replication topology on 127.0.0.1",
        "consistent.emulator.cli:add_emulate_command",
    ),
    "proxy": (
        "run the MySQL-protocol proxy (read/write splitting with session consistency)",
        "proxy.cli:add_proxy_command",
    ),
    "lag-sample": (
        "poll replicas for replication lag and write lag records to the trace stream",
        "consistent.telemetry.cli:add_lag_sample_command",
    ),
    "analyze": (
        "run the Spark staleness analysis over trace files and write the report",
        "analytics.cli:add_analyze_command",
    ),
    "demo": (
        "run the demonstration: emulated topology, proxy, workload, staleness report",
        "consistent.demo.cli:add_demo_command",
    ),
}


def _cmd_version(_args: argparse.Namespace) -> int:
    sys.stdout.write(f"consistent {__version__}\n")
    return 0


def _registrar(path: str) -> Callable[[Any], argparse.ArgumentParser]:
    module_name, _, function = path.partition(":")
    registrar: Callable[[Any], argparse.ArgumentParser] = getattr(
        importlib.import_module(module_name), function
    )
    return registrar


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The argument parser.  Only the subcommand named in ``argv`` (if any) is imported; the
    others appear in the help with their one-line description."""
    parser = CommandParser(
        prog="consistent",
        description="Session-consistency middleware for MySQL/MariaDB replication.",
    )
    parser.add_argument("--version", action="version", version=f"consistent {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    version = sub.add_parser("version", help="print the version")
    version.set_defaults(handler=_cmd_version)
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, (help_text, path) in _SUBCOMMANDS.items():
        if name == chosen:
            _registrar(path)(sub)
        else:
            sub.add_parser(name, help=help_text)
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
