"""``consistent lag-sample``: poll replicas for replication lag, write lag records.

::

    consistent lag-sample --replica 127.0.0.1:3307 --replica 127.0.0.1:3308 \\
        --primary 127.0.0.1:3306 --user app --interval-ms 500 --trace-file lag.jsonl

Records go to the exporters the environment configures (``CONSISTENT_TRACE_FILE``,
``OTEL_TRACES_EXPORTER``…; ``--trace-file`` adds a file), and one summary line per record goes to
standard output unless ``--quiet``.  The password comes from ``--password`` or ``MYSQL_PWD``.
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
    "HELP",
    "add_lag_sample_command",
    "configure_lag_sample",
    "run_lag_sample",
]

HELP: Final = "poll replicas for replication lag and write lag records to the trace stream"
_CONNECT_TIMEOUT: Final = 5


def configure_lag_sample(parser: argparse.ArgumentParser) -> None:
    """Add the ``lag-sample`` options to ``parser``."""
    parser.add_argument(
        "--replica",
        action="append",
        required=True,
        metavar="HOST[:PORT]",
        help="a replica to sample (repeat for several)",
    )
    parser.add_argument(
        "--primary", metavar="HOST[:PORT]", help="the primary (MariaDB: read its gtid_binlog_pos)"
    )
    parser.add_argument("--flavor", choices=("auto", "mysql", "mariadb"), default="auto")
    parser.add_argument("--user", default=os.environ.get("USER", "root"))
    parser.add_argument("--password", default=None, help="default: $MYSQL_PWD")
    parser.add_argument("--interval-ms", type=int, default=1000, help="poll period (ms)")
    parser.add_argument("--count", type=int, default=0, help="rounds to run (0: until ^C)")
    parser.add_argument("--trace-file", type=Path, help="also write lag records to this file")
    parser.add_argument("--quiet", action="store_true", help="no summary lines on stdout")


def add_lag_sample_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``lag-sample`` on an ``argparse`` subparsers object; the parsed namespace's
    ``handler`` is :func:`run_lag_sample`."""
    parser: argparse.ArgumentParser = subparsers.add_parser("lag-sample", help=HELP)
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
    """Run the sampler as ``args`` says; 0 on a clean stop."""
    password = args.password if args.password is not None else os.environ.get("MYSQL_PWD", "")
    connect = _connector(args.user, password)
    replicas = [Endpoint.parse(text) for text in args.replica]
    primary = Endpoint.parse(args.primary) if args.primary else None
    if args.interval_ms < 1 or args.count < 0:
        sys.stderr.write("lag-sample: --interval-ms must be >= 1 and --count >= 0\n")
        return 2
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
        sys.stderr.write(f"lag-sample: cannot reach {replicas[0].name}: {exc}\n")
        telemetry.shutdown()
        return 1
    sampler = LagSampler(
        flavor=flavor,
        replicas=replicas,
        primary=primary,
        connect=connect,
        emit=emit,
        interval=args.interval_ms / 1000,
    )
    stop = threading.Event()
    try:
        sampler.run(stop, rounds=args.count or None)
    except KeyboardInterrupt:
        stop.set()
    finally:
        sampler.close()
        telemetry.shutdown()
    return 0
