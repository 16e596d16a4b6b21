"""The asyncio form's cost and benefit, measured side by side in one run.

Run: ``.venv/bin/python bench/aio.py [--backend mariadb|emulator|all] [--scale N]
[--json PATH]``.

Against each backend (the topologies of ``bench/dbapi.py``: a real MariaDB primary + 2
replicas, and the emulator's in a child process) it prints:

(a) **overhead**: ``consistent.aio.connect`` with no replicas against raw aiomysql, on the
    same primary workload (point SELECTs and UPDATEs by primary key, autocommit), one event
    loop, batches of 100 statements in alternating order; the figure is the median of
    per-batch ratios.  Target: at most 1.05x.
(b) **read cost of the guarantee**: a ``read_own_writes`` read on a replica known to be caught
    up, against an ``eventual`` read (same statement, same replicas), in alternating paired
    batches; the ``read_own_writes`` reads must need no wait (no extra round trip).

``--json PATH`` also writes the figures: ``{"backends": {"emulator"|"mariadb": {"name", "a",
"b"}}}``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

import _side_by_side as side_by_side
import aiomysql
from dbapi import Topology, emulator_topology, mariadb_topology, prepare

import consistent.aio
from consistent.policy import ReplicaKnowledge
from consistent.telemetry import Telemetry, TelemetryConfig


async def _consistent(topo: Topology, *, replicas: bool = True, **kwargs: Any) -> Any:
    return await consistent.aio.connect(
        primary=f"{topo.primary[0]}:{topo.primary[1]}",
        replicas=[f"{h}:{p}" for h, p in topo.replicas] if replicas else [],
        knowledge=ReplicaKnowledge(),
        **topo.options,
        **kwargs,
    )


async def _raw(topo: Topology) -> Any:
    options = dict(topo.options)
    options["db"] = options.pop("database")
    options.pop("ssl_disabled", None)  # aiomysql speaks plain TCP unless given a context
    host, port = topo.primary
    return await aiomysql.connect(host=host, port=port, autocommit=True, **options)


# --- (a) overhead with no replicas --------------------------------------------------------------


async def _primary_workload(conn: Any, table: str, statements: int) -> float:
    cur = await conn.cursor()
    started = time.perf_counter()
    for i in range(statements // 2):
        k = i % 100
        await cur.execute(f"SELECT v FROM {table} WHERE k = %s", (k,))
        await cur.fetchall()
        await cur.execute(f"UPDATE {table} SET v = v + 1 WHERE k = %s", (k,))
    return time.perf_counter() - started


async def bench_overhead(topo: Topology, table: str, scale: int) -> dict[str, float]:
    disabled = Telemetry(TelemetryConfig(enabled=False))
    conns: dict[str, Any] = {
        "raw": await _raw(topo),
        "ours": await _consistent(topo, replicas=False, telemetry=disabled),
    }
    batch = 100
    rounds = max(4, int(40 * scale * topo.share))
    for conn in conns.values():  # warm the connections and the server
        await _primary_workload(conn, table, batch)
    names = list(conns)
    ratios: list[float] = []
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for run in range(rounds):  # short batches in alternating order: both see the same load
        for name in names if run % 2 == 0 else names[::-1]:
            started = time.process_time()
            wall[name].append(await _primary_workload(conns[name], table, batch))
            cpu[name].append(time.process_time() - started)
        ratios.append(wall["ours"][-1] / wall["raw"][-1])
    for conn in conns.values():
        await conn.ensure_closed()
    disabled.shutdown()
    return {
        "statements": batch * rounds,
        **side_by_side.per_statement(names, wall, cpu, batch),
        "ratio": statistics.median(ratios),
    }


# --- (b) read_own_writes read on a caught-up replica vs eventual -------------------------------


async def _timed_reads(conn: Any, table: str, reads: int) -> tuple[list[float], int]:
    cur = await conn.cursor()
    samples: list[float] = []
    waits = 0
    for i in range(reads):
        started = time.perf_counter()
        await cur.execute(f"SELECT v FROM {table} WHERE k = %s", (i % 100,))
        await cur.fetchall()
        samples.append(time.perf_counter() - started)
        if side_by_side.replica_read_waited(conn):
            waits += 1
    return samples, waits


async def bench_read_cost(topo: Topology, table: str, scale: int) -> dict[str, float]:
    row = await _consistent(topo, level="read_own_writes")
    eventual = await _consistent(topo, level="eventual")
    cur = await row.cursor()
    update = f"UPDATE {table} SET v = v + 1 WHERE k = 0"
    await cur.execute(update)  # the session now requires a GTID
    topo.replicate([update])
    await _timed_reads(row, table, 50)  # the first read waits once; the replicas become known
    await _timed_reads(eventual, table, 50)
    batch = 50
    rounds = max(4, int(30 * scale * topo.share))
    ratios: list[float] = []
    row_samples: list[float] = []
    ev_samples: list[float] = []
    row_waits = 0
    for run in range(rounds):  # short alternating batches, paired: same machine load
        order = (row, eventual) if run % 2 == 0 else (eventual, row)
        medians: dict[int, float] = {}
        for conn in order:
            samples, waits = await _timed_reads(conn, table, batch)
            medians[id(conn)] = statistics.median(samples)
            if conn is row:
                row_samples += samples
                row_waits += waits
            else:
                ev_samples += samples
        ratios.append(medians[id(row)] / medians[id(eventual)])
    await row.ensure_closed()
    await eventual.ensure_closed()
    return {
        "reads": len(row_samples),
        "row_us": statistics.median(row_samples) * 1e6,
        "eventual_us": statistics.median(ev_samples) * 1e6,
        "ratio": statistics.median(ratios),
        "row_waits": row_waits,
    }


def run(topo: Topology, scale: int) -> dict[str, Any]:
    """Print (a) and (b) on ``topo`` and return their figures."""
    print(f"\n== {topo.name}")
    prepare(topo, "bench_kv")
    b = asyncio.run(bench_read_cost(topo, "bench_kv", scale))
    print(
        f"(b) read_own_writes on a caught-up replica vs eventual, {b['reads']:.0f} reads each: "
        f"{b['row_us']:.0f} us vs {b['eventual_us']:.0f} us (medians), "
        f"ratio {b['ratio']:.3f}x (median of paired batches), "
        f"waits {b['row_waits']:.0f} (target 0)"
    )
    a = asyncio.run(bench_overhead(topo, "bench_kv", scale))
    print(
        f"(a) no replicas vs raw aiomysql, {a['statements']:.0f} statements each in "
        "alternating batches of 100: "
        f"raw {a['raw_us']:.0f} us/stmt, consistent.aio {a['ours_us']:.0f} us/stmt, "
        f"ratio {a['ratio']:.3f}x (median of paired batches; target <= 1.05x); "
        f"client CPU {a['raw_cpu_us']:.1f} vs {a['ours_cpu_us']:.1f} us/stmt"
    )
    return {"name": topo.name, "a": a, "b": b}


def main(argv: list[str] | None = None) -> int:
    topologies = {"emulator": emulator_topology, "mariadb": mariadb_topology}
    description = __doc__.split("\n\n")[0]
    return side_by_side.main(
        argv,
        description,
        driver="aiomysql",
        distribution="aiomysql",
        run=run,
        topologies=topologies,
    )


if __name__ == "__main__":
    sys.exit(main())
