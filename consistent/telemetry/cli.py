"""``consistent lag-sample``: poll replicas for replication lag, write lag records.

The command's help is :data:`DESCRIPTION`; :func:`add_lag_sample_command` registers it on the
``consistent`` parser and :func:`run_lag_sample` is its handler.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pymysql

from consistent.command import EXIT_FAILURE, CommandError
from consistent.errors import InterfaceError
from consistent.flavors import detect_flavor
from consistent.telemetry.config import TelemetryConfig
from consistent.telemetry.pipeline import Telemetry
from consistent.telemetry.records import SpanRecord
from consistent.telemetry.sampler import Endpoint, Flavor, LagSampler, SamplerConnection
from consistent.trace import (
    ERROR_TYPE,
    LAG_APPLY_LAG_US,
    LAG_CHANNEL,
    LAG_IO_RUNNING,
    LAG_REACHABLE,
    LAG_REPLICA,
    LAG_SECONDS_BEHIND_MASTER,
    LAG_SQL_RUNNING,
    LAG_TRANSACTIONS_BEHIND,
)

__all__ = [
    "DESCRIPTION",
    "HELP",
    "add_lag_sample_command",
    "configure_lag_sample",
    "run_lag_sample",
]

HELP: Final = "poll replicas for replication lag and write lag records to the trace stream"
DESCRIPTION: Final = """\
Poll replicas for replication lag and write one lag record per replica per poll.

  consistent lag-sample --replica 127.0.0.1:3307 --replica 127.0.0.1:3308 \\
      --primary 127.0.0.1:3306 --user app --interval-ms 500 --trace-file lag.jsonl

MySQL replicas are read through the performance_schema replication tables, MariaDB replicas
through SHOW ALL SLAVES STATUS and their GTID positions.  Records go to the exporters the
environment configures (CONSISTENT_TRACE_FILE, OTEL_TRACES_EXPORTER, …; --trace-file adds a
file), where consistent analyze reads them beside the statements' traces.  One summary line
per record goes to standard output unless --quiet.  Runs until Ctrl-C (exit status 130) or
for --count rounds.
"""
_CONNECT_TIMEOUT: Final = 5


def _endpoint(text: str) -> Endpoint:
    """An ``argparse`` type: ``host``, ``host:port`` or ``[v6]:port``, optionally after
    ``NAME=``."""
    try:
        return Endpoint.parse(text)
    except InterfaceError as exc:
        raise argparse.ArgumentTypeError(exc.msg) from None


def configure_lag_sample(parser: argparse.ArgumentParser) -> None:
    """Add the ``lag-sample`` options to ``parser``."""
    parser.add_argument(
        "--replica",
        action="append",
        required=True,
        type=_endpoint,
        metavar="[NAME=]HOST[:PORT]",
        help="a replica to sample (repeat for several; port 3306 unless given); NAME, when "
        "given, names it in the traces and the report",
    )
    parser.add_argument(
        "--primary",
        type=_endpoint,
        metavar="HOST[:PORT]",
        help="the primary (MariaDB: its gtid_binlog_pos tells how far behind each replica is)",
    )
    parser.add_argument(
        "--flavor",
        choices=("auto", "mysql", "mariadb"),
        default="auto",
        help="the servers' flavour (default auto: detected from the first replica)",
    )
    parser.add_argument(
        "--user",
        default=os.environ.get("USER", "root"),
        help="the account to connect as (default: $USER, else root)",
    )
    parser.add_argument(
        "--password", default=None, help="its password (default: $MYSQL_PWD, else none)"
    )
    parser.add_argument(
        "--interval-ms", type=int, default=1000, help="poll period in milliseconds (default 1000)"
    )
    parser.add_argument(
        "--count", type=int, default=0, help="rounds to run (default 0: until Ctrl-C)"
    )
    parser.add_argument(
        "--trace-file", type=Path, help="also write the lag records to this file (OTLP-JSON lines)"
    )
    parser.add_argument("--quiet", action="store_true", help="no summary lines on stdout")


def add_lag_sample_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``lag-sample`` on an ``argparse`` subparsers object; the parsed namespace's
    ``handler`` is :func:`run_lag_sample`."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "lag-sample",
        help=HELP,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure_lag_sample(parser)
    parser.set_defaults(handler=run_lag_sample)
    return parser


def _connector(user: str, password: str) -> Callable[[Endpoint], SamplerConnection]:
    def connect(endpoint: Endpoint) -> SamplerConnection:
        connection: SamplerConnection = pymysql.connect(
            host=endpoint.host,
            port=endpoint.port,
            user=user,
            password=password,
            connect_timeout=_CONNECT_TIMEOUT,
            autocommit=True,
            # performance_schema DATETIME(6) columns are read as UTC.
            init_command="SET time_zone = '+00:00'",
        )
        return connection

    return connect


def _flavor(choice: str, endpoint: Endpoint, connect: Callable[[Endpoint], Any]) -> Flavor:
    if choice in ("mysql", "mariadb"):
        return "mysql" if choice == "mysql" else "mariadb"
    connection = connect(endpoint)
    try:
        name = detect_flavor(connection.get_server_info()).name
    finally:
        connection.close()
    return "mariadb" if name == "mariadb" else "mysql"


def summary(record: SpanRecord) -> str:
    """One human line for a lag record."""
    attributes = record.attributes
    when = dt.datetime.fromtimestamp(record.start_ns / 1e9, dt.UTC).strftime("%H:%M:%S.%f")[:-3]
    parts = [when, f"replica={attributes.get(LAG_REPLICA)}"]
    channel = attributes.get(LAG_CHANNEL)
    if channel:
        parts.append(f"channel={channel}")
    if attributes.get(LAG_REACHABLE) is False:
        parts.append(f"unreachable ({attributes.get(ERROR_TYPE)})")
        return " ".join(parts)
    lag_us = attributes.get(LAG_APPLY_LAG_US)
    if isinstance(lag_us, int):
        parts.append(f"apply_lag={lag_us / 1e6:.6f}s")
    for label, name in (
        ("seconds_behind", LAG_SECONDS_BEHIND_MASTER),
        ("behind_trx", LAG_TRANSACTIONS_BEHIND),
        ("io", LAG_IO_RUNNING),
        ("sql", LAG_SQL_RUNNING),
    ):
        if name in attributes:
            parts.append(f"{label}={attributes[name]}")
    return " ".join(parts)


def run_lag_sample(args: argparse.Namespace) -> int:
    """Run the sampler as ``args`` says; 0 after ``--count`` rounds (Ctrl-C raises
    ``KeyboardInterrupt`` once the sampler and the exporters are closed)."""
    password = args.password if args.password is not None else os.environ.get("MYSQL_PWD", "")
    connect = _connector(args.user, password)
    replicas: list[Endpoint] = list(args.replica)
    primary: Endpoint | None = args.primary
    if args.interval_ms < 1:
        raise CommandError("--interval-ms must be at least 1")
    if args.count < 0:
        raise CommandError("--count must be 0 (until Ctrl-C) or more")
    config = TelemetryConfig.from_env()
    if args.trace_file is not None:
        exporters = tuple(dict.fromkeys((*config.traces_exporters, "file")))
        config = dataclasses.replace(config, trace_file=args.trace_file, traces_exporters=exporters)
    telemetry = Telemetry(config)
    quiet = bool(args.quiet)

    def emit(record: SpanRecord) -> None:
        telemetry.emit(record)
        if not quiet:
            sys.stdout.write(summary(record) + "\n")
            sys.stdout.flush()

    try:
        flavor = _flavor(args.flavor, replicas[0], connect)
    except Exception as exc:
        telemetry.shutdown()
        raise CommandError(
            f"cannot reach {replicas[0].name}: {_reason(exc)}", EXIT_FAILURE
        ) from exc
    sampler = LagSampler(
        flavor=flavor,
        replicas=replicas,
        primary=primary,
        connect=connect,
        emit=emit,
        interval=args.interval_ms / 1000,
    )
    try:
        sampler.run(threading.Event(), rounds=args.count or None)
    finally:
        sampler.close()
        telemetry.shutdown()
    return 0


def _reason(exc: Exception) -> str:
    """A driver error's message (PyMySQL's ``args`` are ``(errno, message)``)."""
    args = exc.args
    if len(args) == 2 and isinstance(args[0], int):
        return str(args[1])
    return str(exc) or type(exc).__name__
