"""``consistent proxy --config FILE``: run the proxy until SIGTERM or SIGINT.

Command-line options override the file (and keep overriding it across reloads); ``SIGHUP``
re-reads the file and applies its backends, users and pool limits without disturbing sessions
in flight (``[pool] multiplexing`` applies to sessions that log in afterwards; ``listen`` needs
a restart);
``SIGTERM``/``SIGINT`` shut down gracefully (sessions drain until ``shutdown_timeout``), then
the command exits with 0 after SIGTERM and 130 after SIGINT.  A configuration that does not
load is one line on stderr (``consistent proxy: error: …``) and status 2.  Logs go to stderr,
one line per record, as text or as JSON lines with ``--log-format json``
(:mod:`proxy.logformat`: control characters are escaped in every field, so what a client
sends cannot forge a line; the client and the user of a record are fields of their own); no
log line carries a password (configuration objects hide their
secrets from ``repr``).

The subcommand is registered by ``consistent.cli`` through :func:`add_proxy_command`;
``python -m proxy --config FILE`` runs it directly.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from consistent.command import EXIT_FAILURE, CommandError, CommandParser, run
from consistent.policy import Level
from proxy.config import ConfigError, ProxyConfig, load
from proxy.logformat import JsonFormatter, TextFormatter
from proxy.server import ProxyServer

__all__ = [
    "DESCRIPTION",
    "JsonFormatter",
    "TextFormatter",
    "add_proxy_command",
    "command",
    "configure_parser",
    "main",
    "overrides_from",
]

logger = logging.getLogger(__name__)

_ADMIN_TOKEN_ENV = "CONSISTENT_PROXY_ADMIN_TOKEN"

DESCRIPTION = """\
Run the MySQL-protocol proxy: any MySQL client connects to it and gets read/write splitting
with session consistency (a read goes to a replica only once that replica has what the
session's consistency level requires).

  consistent proxy --config proxy.toml
  consistent proxy --config proxy.toml --replica 127.0.0.1:3307 --log-format json

The options override the file's keys.  SIGHUP reloads the file (backends, users, pool limits;
multiplexing for new sessions; not the listen address) without disturbing sessions in flight;
SIGTERM and SIGINT (Ctrl-C) drain the sessions, then the
command exits with status 0 (SIGTERM) or 130 (SIGINT).  The admin token may come from the
CONSISTENT_PROXY_ADMIN_TOKEN environment variable.
"""


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The options of ``consistent proxy``."""
    parser.add_argument(
        "--config", required=True, type=Path, help="the TOML configuration file (see the README)"
    )
    parser.add_argument(
        "--listen", metavar="HOST:PORT", help="where clients connect (overrides listen)"
    )
    parser.add_argument(
        "--primary", metavar="HOST:PORT", help="the primary (overrides backends.primary)"
    )
    parser.add_argument(
        "--replica",
        action="append",
        metavar="HOST:PORT",
        help="a replica; repeat for several (replaces backends.replicas)",
    )
    parser.add_argument(
        "--level",
        choices=[level.value for level in Level],
        help="default consistency level of a session (overrides level)",
    )
    parser.add_argument(
        "--flavor",
        choices=["mysql", "mariadb"],
        help="the servers' flavour (overrides backends.flavor; default: from the handshake)",
    )
    parser.add_argument(
        "--multiplexing",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="share backend connections among sessions (overrides pool.multiplexing; default on)",
    )
    parser.add_argument(
        "--admin-listen",
        metavar="HOST:PORT",
        help="the admin endpoint, /metrics and /status (overrides admin.listen)",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the least severe log records written to stderr (default info)",
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="text lines, or one JSON object per line (default text)",
    )


def overrides_from(args: argparse.Namespace) -> dict[str, object]:
    """Dotted configuration keys set on the command line (the admin token may come from
    the ``CONSISTENT_PROXY_ADMIN_TOKEN`` environment variable rather than argv)."""
    overrides: dict[str, object] = {}
    if args.listen:
        overrides["listen"] = args.listen
    if args.primary:
        overrides["backends.primary"] = args.primary
    if args.replica:
        overrides["backends.replicas"] = list(args.replica)
    if args.level:
        overrides["level"] = args.level
    if args.flavor:
        overrides["backends.flavor"] = args.flavor
    if args.multiplexing is not None:
        overrides["pool.multiplexing"] = args.multiplexing
    if args.admin_listen:
        overrides["admin.listen"] = args.admin_listen
    token = os.environ.get(_ADMIN_TOKEN_ENV)
    if token:
        overrides["admin.token"] = token
    return overrides


def setup_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


async def serve(path: Path, overrides: dict[str, object], config: ProxyConfig) -> int:
    """Run a proxy for ``config`` until a stop signal; reload ``path`` on SIGHUP.  Returns
    the signal that stopped it."""
    loop = asyncio.get_running_loop()
    server = ProxyServer(config)
    stop = asyncio.Event()
    received: list[int] = []

    def reload() -> None:
        try:
            server.reload(load(path, overrides))
        except ConfigError as e:
            logger.error("reload failed, keeping the running configuration: %s", e)

    def stop_on(signum: int) -> None:
        received.append(signum)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop_on, sig)
    loop.add_signal_handler(signal.SIGHUP, reload)
    await server.start()
    try:
        await stop.wait()
        logger.info("stopping: draining sessions")
    finally:
        await server.shutdown()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
    return received[0]


def command(args: argparse.Namespace) -> int:
    """The ``consistent proxy`` handler: 0 after SIGTERM; ``KeyboardInterrupt`` once drained
    after SIGINT (status 130 through :func:`consistent.command.run`);
    :class:`~consistent.command.CommandError` when the proxy cannot start."""
    overrides = overrides_from(args)
    try:
        config = load(args.config, overrides)
    except ConfigError as e:
        raise CommandError(str(e)) from e
    setup_logging(args.log_level, args.log_format)
    coro = serve(Path(args.config), overrides, config)
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    try:
        stopped_by: int = runner(coro)
    except ConfigError as e:
        raise CommandError(str(e)) from e
    except OSError as e:
        raise CommandError(f"cannot start: {e.strerror or e}", EXIT_FAILURE) from e
    if stopped_by == signal.SIGINT:
        raise KeyboardInterrupt
    return 0


def add_proxy_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``proxy`` on an ``argparse`` subparsers object."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "proxy",
        help="run the MySQL-protocol proxy (read/write splitting with read-your-writes)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure_parser(parser)
    parser.set_defaults(handler=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m proxy``."""
    parser = CommandParser(
        prog="consistent proxy",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure_parser(parser)
    return run("consistent proxy", command, parser.parse_args(argv))
