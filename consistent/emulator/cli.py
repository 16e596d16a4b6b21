"""``consistent emulate``: start an emulated replication topology and keep it running.

The command's help is :data:`DESCRIPTION`; :func:`add_emulate_command` registers it on the
``consistent`` parser and :func:`run_emulate` is its handler, which raises
:class:`~consistent.command.CommandError` when the topology cannot start (the ``consistent``
command prints it as one line).  ``python -m consistent.emulator.cli`` runs it on its own.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TextIO

from consistent.command import (
    EXIT_FAILURE,
    CommandError,
    CommandParser,
    loopback_host,
    run,
)
from consistent.emulator.config import emulated_version
from consistent.emulator.replication.lagmodel import LagModelError, parse_distribution
from consistent.emulator.replication.specfile import lag_model_from, load_spec, spec_from_options
from consistent.emulator.replication.threaded import TopologyThread
from consistent.emulator.replication.topology import TopologyError, TopologySpec

__all__ = ["DESCRIPTION", "add_emulate_command", "build_spec", "run_emulate"]

DESCRIPTION = """\
Start an emulated MySQL replication topology and keep it running.

  consistent emulate --replicas 2 --lag 20ms..800ms
  consistent emulate --chain 3 --lag 50ms
  consistent emulate --replicas 1 --delayed-replica 30
  consistent emulate --spec topology.toml
  consistent emulate --replicas 2 --port 3306     # primary on 3306, replicas on 3307, 3308

Each server listens on its own port on 127.0.0.1 (free ports unless --port or the spec's
port key says which) and speaks the MySQL protocol (user root, no password).  The command
prints one line per server (name, address and the lag model of its channels) and runs until
Ctrl-C (exit status 130) or SIGTERM (0), or for --duration seconds.  Time is real.
"""


def _distribution_arg(text: str) -> str:
    try:
        parse_distribution(text)
    except LagModelError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``emulate`` options to ``parser``."""
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument(
        "--replicas", type=int, metavar="N", help="a primary and N replicas (default 2)"
    )
    shape.add_argument("--chain", type=int, metavar="N", help="a chain a → b → … of N servers")
    shape.add_argument(
        "--multi-source", type=int, metavar="N", help="N sources replicated by one replica"
    )
    shape.add_argument(
        "--spec",
        metavar="FILE",
        help='a TOML topology file: these options as keys (replicas = 2, lag = "50ms", '
        "port = 3306, …) or [[server]] and [[channel]] tables",
    )
    parser.add_argument(
        "--lag",
        type=_distribution_arg,
        metavar="DIST",
        help="network delay per transaction: 50ms, 20ms..800ms, exp(100ms), normal(m,s), "
        "lognormal(median,sigma)",
    )
    parser.add_argument(
        "--apply",
        type=_distribution_arg,
        metavar="DIST",
        help="time to apply each transaction on a replica (same forms as --lag)",
    )
    parser.add_argument(
        "--workers", type=int, metavar="N", help="applier workers per channel (0: a single applier)"
    )
    parser.add_argument(
        "--delay",
        type=int,
        default=0,
        metavar="SECONDS",
        help="SOURCE_DELAY of every replica, in seconds",
    )
    parser.add_argument(
        "--delayed-replica",
        type=int,
        metavar="SECONDS",
        help="add a replica 'delayed' with this SOURCE_DELAY",
    )
    parser.add_argument(
        "--mysql-version",
        metavar="VERSION",
        help="MySQL version every server emulates: 8.0 (default), 8.4, or x.y.z",
    )
    parser.add_argument(
        "--seed", type=int, metavar="N", help="seed of the lag distributions (repeatable runs)"
    )
    parser.add_argument(
        "--host",
        type=loopback_host,
        default="127.0.0.1",
        help="loopback address to listen on: 127.0.0.0/8 or ::1 (default 127.0.0.1)",
    )
    parser.add_argument(
        "--port",
        type=int,
        metavar="BASE",
        help="the primary's port; the other servers listen on the following ports, in the "
        "order printed (default: free ports; overrides the spec's port key)",
    )
    parser.add_argument(
        "--duration",
        type=float,
        metavar="SECONDS",
        help="stop after this many seconds instead of waiting for a signal",
    )
    parser.add_argument("--json", action="store_true", help="print the servers as JSON")


def build_spec(args: argparse.Namespace) -> TopologySpec:
    """The topology the options describe (raises :class:`TopologyError`)."""
    spec = _shape(args)
    port: int | None = getattr(args, "port", None)
    return spec if port is None else spec.with_ports(port)


def _shape(args: argparse.Namespace) -> TopologySpec:
    if args.spec:
        return load_spec(args.spec)
    lag_fields: dict[str, Any] = {}
    if args.lag is not None:
        lag_fields["network"] = args.lag
    if args.apply is not None:
        lag_fields["apply"] = args.apply
    if args.workers is not None:
        lag_fields["workers"] = args.workers
    if args.seed is not None:
        lag_fields["seed"] = args.seed
    spec = spec_from_options(
        replicas=args.replicas,
        chain=args.chain,
        multi_source=args.multi_source,
        lag=lag_model_from(lag_fields),
        delay=args.delay,
        delayed_replica=args.delayed_replica,
    )
    if args.mysql_version:
        version = emulated_version(args.mysql_version)
        servers = tuple(dataclasses.replace(s, version=version) for s in spec.servers)
        spec = TopologySpec(servers=servers, channels=spec.channels)
    return spec


def _describe(topology: TopologyThread, as_json: bool) -> str:
    if as_json:
        servers = [
            {
                "name": e.name,
                "host": e.host,
                "port": e.port,
                "user": e.user,
                "server_uuid": e.server_uuid,
                "server_id": e.server_id,
                "role": e.role,
                "sources": [c.source for c in topology.spec.channels if c.replica == e.name],
            }
            for e in topology.servers
        ]
        return json.dumps({"servers": servers}) + "\n"
    lines = [topology.describe(), ""]
    primary = topology.primary
    lines.append(f"connect: mysql -h {primary.host} -P {primary.port} -u {primary.user}")
    lines.append("Ctrl-C to stop.")
    return "\n".join(lines) + "\n"


def run_emulate(
    args: argparse.Namespace,
    *,
    out: TextIO | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Start the topology, print the servers, wait for a signal (or ``--duration``): 0 at
    the end of ``--duration`` or on SIGTERM; on SIGINT (Ctrl-C) the topology closes, then
    ``KeyboardInterrupt`` is raised (:func:`consistent.command.run` makes it status 130)."""
    stream = out or sys.stdout
    try:
        spec = build_spec(args)
    except (TopologyError, LagModelError) as exc:
        raise CommandError(exc.msg) from exc
    done = stop or threading.Event()
    received: list[int] = []

    def stop_on(signum: int) -> None:
        received.append(signum)
        done.set()

    restore = _on_signals(stop_on)
    try:
        try:
            topology_thread = TopologyThread(spec, host=args.host, fast_loop=True).start()
        except TopologyError as exc:
            raise CommandError(exc.msg, EXIT_FAILURE) from exc
        with topology_thread as topology:
            stream.write(_describe(topology, args.json))
            stream.flush()
            with contextlib.suppress(KeyboardInterrupt):
                done.wait(args.duration)
    finally:
        restore()
    if signal.SIGINT in received:
        raise KeyboardInterrupt
    return 0


def _on_signals(callback: Callable[[int], None]) -> Callable[[], None]:
    """Turn SIGINT and SIGTERM into ``callback(signum)`` while the topology runs (main thread
    only), so a signal at any moment ends the wait and the topology still closes cleanly."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, frame: FrameType | None) -> None:
        callback(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


def add_emulate_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``emulate`` on the ``consistent`` command's subparsers; the handler is stored
    as the ``handler`` default (``handler(args) -> exit status``)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "emulate",
        help="run an emulated MySQL replication topology on loopback ports",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure(parser)
    parser.set_defaults(handler=run_emulate)
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m consistent.emulator.cli``: the command on its own."""
    parser = CommandParser(
        prog="consistent emulate",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure(parser)
    return run("consistent emulate", run_emulate, parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
