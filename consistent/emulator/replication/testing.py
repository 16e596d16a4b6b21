"""Test support for replication topologies in virtual time.

::

    def test_lag() -> None:
        async def scenario(clock: VirtualClock) -> None:
            async with await virtual_topology(TopologySpec.chain(3), clock) as topo:
                await execute(topo.server("a"), "CREATE DATABASE d")
                await clock.sleep(1.0)
                row = await first(topo.server("c"), "SELECT * FROM performance_schema.…")

        run_virtual(scenario)
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from consistent.emulator.replication.clock import VirtualClock, run_virtual
from consistent.emulator.replication.topology import Topology, TopologySpec
from consistent.emulator.results import Outcome
from consistent.emulator.server import EmulatedServer

__all__ = ["dict_rows", "execute", "first", "run_virtual", "to_us", "virtual_topology"]


async def virtual_topology(spec: TopologySpec, clock: VirtualClock) -> Topology:
    """``spec`` started on the running virtual loop, without sockets."""
    return await Topology.start(spec, clock=clock, serve=False)


async def execute(server: EmulatedServer, sql: str) -> list[Outcome]:
    """Run ``sql`` on a fresh session of ``server`` and close it."""
    session = server.open_session()
    try:
        return await session.query_all(sql)
    finally:
        await session.close()


async def dict_rows(server: EmulatedServer, sql: str) -> list[dict[str, Any]]:
    """Rows of the last result of ``sql`` as dicts keyed by column name."""
    outcomes = await execute(server, sql)
    result = outcomes[-1].result if outcomes else None
    if result is None:
        return []
    names = [c.name for c in result.columns]
    return [dict(zip(names, row, strict=True)) for row in result.rows]


async def first(server: EmulatedServer, sql: str) -> dict[str, Any]:
    """The first row of ``sql`` (AssertionError when there is none)."""
    found = await dict_rows(server, sql)
    assert found, f"no rows: {sql}"
    return found[0]


def to_us(value: object) -> int:
    """A performance_schema TIMESTAMP(6) value read through SQL (a naive UTC ``datetime``, or
    the zero-timestamp text) as µs since the epoch; 0 for the zero timestamp."""
    if isinstance(value, str):
        if value.startswith("0000-00-00"):
            return 0
        value = dt.datetime.fromisoformat(value)
    if not isinstance(value, dt.datetime):
        raise TypeError(f"not a timestamp: {value!r}")
    moment = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    delta = moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
