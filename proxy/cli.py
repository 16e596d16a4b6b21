"""``consistent proxy --config FILE``: run the proxy until SIGTERM or SIGINT.

Command-line options override the file (and keep overriding it across reloads); ``SIGHUP``
re-reads the file and applies its backends and users without disturbing sessions in flight;
``SIGTERM``/``SIGINT`` shut down gracefully (sessions drain until ``shutdown_timeout``).
Logs go to stderr, one line per record, as text or as JSON lines with ``--log-format json``
(:mod:`proxy.logformat`: control characters are escaped in every field, so what a client
sends cannot forge a line); no log line carries a password (configuration objects hide their
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

from proxy.config import ConfigError, ProxyConfig, load
from proxy.logformat import JsonFormatter, TextFormatter
from proxy.server import ProxyServer

__all__ = [
    "JsonFormatter",
    "add_proxy_command",
    "command",
    "configure_parser",
    "main",
    "overrides_from",
]

logger = logging.getLogger(__name__)

_ADMIN_TOKEN_ENV = "CONSISTENT_PROXY_ADMIN_TOKEN"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The options of ``consistent proxy``."""
    parser.add_argument("--config", required=True, type=Path, help="TOML configuration file")
    parser.add_argument("--listen", help="host:port for clients (overrides 'listen')")
    parser.add_argument("--primary", help="host:port of the primary (overrides backends.primary)")
    parser.add_argument(
        "--replica",
        action="append",
        help="host:port of a replica; repeat for several (replaces backends.replicas)",
    )
    parser.add_argument("--level", help="default consistency level (overrides 'level')")
    parser.add_argument("--flavor", choices=["mysql", "mariadb"], help="server flavour")
    parser.add_argument("--admin-listen", help="host:port of the admin endpoint (loopback)")
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    parser.add_argument("--log-format", default="text", choices=["text", "json"])


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


async def serve(path: Path, overrides: dict[str, object], config: ProxyConfig) -> None:
    """Run a proxy for ``config`` until a stop signal; reload ``path`` on SIGHUP."""
    loop = asyncio.get_running_loop()
    server = ProxyServer(config)
    stop = asyncio.Event()

    def reload() -> None:
        try:
            server.reload(load(path, overrides))
        except ConfigError as e:
            logger.error("reload failed, keeping the running configuration: %s", e)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, reload)
    await server.start()
    try:
        await stop.wait()
        logger.info("stopping: draining sessions")
    finally:
        await server.shutdown()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)


def command(args: argparse.Namespace) -> int:
    """The ``consistent proxy`` handler."""
    setup_logging(args.log_level, args.log_format)
    overrides = overrides_from(args)
    try:
        config = load(args.config, overrides)
    except ConfigError as e:
        logger.error("%s", e)
        return 2
    coro = serve(Path(args.config), overrides, config)
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    try:
        runner(coro)
    except ConfigError as e:
        logger.error("%s", e)
        return 2
    except OSError as e:
        logger.error("cannot start: %s", e)
        return 1
    return 0


def add_proxy_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``proxy`` on an ``argparse`` subparsers object."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "proxy",
        help="run the MySQL-protocol proxy (read/write splitting with read-your-writes)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    configure_parser(parser)
    parser.set_defaults(handler=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m proxy``."""
    parser = argparse.ArgumentParser(prog="consistent proxy")
    configure_parser(parser)
    return command(parser.parse_args(argv))
