"""What ``bench/dbapi.py`` and ``bench/aio.py`` share: the command line and its JSON, the check
of each timed replica read, and the per-statement figures of the overhead batches.  The two
scripts differ only where one awaits."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from importlib import metadata
from typing import Any

from consistent.policy import PRIMARY


def replica_read_waited(conn: Any) -> bool:
    """Whether the read ``conn`` just ran waited for its replica; a read that went to the
    primary spoils the measure and raises."""
    decision = conn.last_decision
    assert decision is not None
    if decision.target == PRIMARY:
        raise RuntimeError(f"a read went to the primary: {decision.reason_text}")
    return bool(decision.wait_set)


def per_statement(
    names: list[str], wall: dict[str, list[float]], cpu: dict[str, list[float]], batch: int
) -> dict[str, float]:
    """``<name>_us`` and ``<name>_cpu_us``: median microseconds a statement, wall clock and
    client CPU, of each connection's batches of ``batch`` statements."""
    figures: dict[str, float] = {}
    for name in names:
        figures[f"{name}_us"] = statistics.median(wall[name]) / batch * 1e6
    for name in names:
        figures[f"{name}_cpu_us"] = statistics.median(cpu[name]) / batch * 1e6
    return figures


def main(
    argv: list[str] | None,
    description: str,
    *,
    driver: str,
    distribution: str,
    run: Callable[[Any, int], dict[str, Any]],
    topologies: Mapping[str, Callable[[], AbstractContextManager[Any]]],
) -> int:
    """The scripts' command line: ``--backend``, ``--scale``, ``--json``; ``run(topology,
    scale)`` measures one backend, ``topologies`` (``"emulator"``, ``"mariadb"``) give them
    (the emulator's gives ``None`` where it is not available); ``driver`` is the key of the
    driver's version (its ``distribution``) in the JSON."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", choices=("mariadb", "emulator", "all"), default="all")
    parser.add_argument("--scale", type=int, default=1, help="multiply the workload sizes")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    print(f"python {sys.version.split()[0]}, {distribution} {metadata.version(distribution)}")
    backends: dict[str, Any] = {}
    if args.backend in ("emulator", "all"):
        with topologies["emulator"]() as topo:
            if topo is None:
                print("\n== emulator: not available")
            else:
                backends["emulator"] = run(topo, args.scale)
    if args.backend in ("mariadb", "all"):
        with topologies["mariadb"]() as topo:
            backends["mariadb"] = run(topo, args.scale)
    if args.json:
        payload = {
            "python": sys.version.split()[0],
            driver: metadata.version(distribution),
            "scale": args.scale,
            "backends": backends,
        }
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(payload, out, indent=2)
    return 0
