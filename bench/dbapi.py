"""The DB-API wrapper's cost and benefit, measured side by side in one run.

Run: ``.venv/bin/python bench/dbapi.py [--backend mariadb|emulator|all] [--scale N]
[--json PATH]``.

Against each backend (a real MariaDB primary + 2 replicas started with
``consistent.testing.mariadb``; the emulator's topology when it offers one) it prints:

(a) **overhead**: ``consistent.connect`` with no replicas against raw PyMySQL, on the same
    primary workload (point SELECTs and UPDATEs by primary key, autocommit).  Runs alternate and
    the figure is the median of per-run ratios.  Target: at most 1.05x.  The same workload
    with tracing on (every statement's span written to an OTLP-JSON lines file, each batch's
    time including its export) against tracing off: target at most 1.05x too
    (``bench/tracing.py`` measures that one in more detail).
(b) **read cost of the guarantee**: a ``read_own_writes`` read on a replica known to be caught
    up, against an ``eventual`` read (same statement, same replicas), in alternating paired
    batches.  Target: at most 1.10x; the ``read_own_writes`` reads must need no wait (no extra
    round trip).
(c) **write-then-read under lag below the timeout**: each iteration updates a row and reads it
    back while one replica at a time has its applier stopped for 60 ms (wait timeout 1 s).
    Printed: the share of reads served by replicas (target at least 95%) and read-your-writes
    violations (target 0), with the same workload at ``eventual`` as the control.

``--json PATH`` also writes the figures: ``{"backends": {"emulator"|"mariadb": {"name", "a",
"b", "c"}}}`` where ``a``, ``b``, ``c`` hold the figures printed for (a), (b), (c) (``c`` is
``null`` when the backend cannot lag a replica).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _side_by_side as side_by_side
import pymysql

import consistent.dbapi as db
from consistent.policy import PRIMARY, ReplicaKnowledge
from consistent.telemetry import Telemetry, TelemetryConfig
from consistent.testing.replication import injected_lag


@dataclass
class Topology:
    """What the bench needs from a backend."""

    name: str
    primary: tuple[str, int]
    replicas: list[tuple[str, int]]
    options: dict[str, Any]
    #: Bring every replica to the primary's state after ``statements`` ran on the primary
    #: (real replication waits; the emulator pair applies them by hand).
    replicate: Callable[[list[str]], None]
    #: Stop / restart a replica's applier (``None``: the backend cannot inject lag).
    pause: Callable[[int], None] | None = None
    resume: Callable[[int], None] | None = None
    #: Fraction of the default workload to run (a slow backend runs less).
    share: float = 1.0

    def consistent(self, *, replicas: bool = True, **kwargs: Any) -> db.Connection:
        return db.connect(
            primary=f"{self.primary[0]}:{self.primary[1]}",
            replicas=[f"{h}:{p}" for h, p in self.replicas] if replicas else [],
            knowledge=ReplicaKnowledge(),
            **self.options,
            **kwargs,
        )

    def raw(self) -> Any:
        host, port = self.primary
        return pymysql.connect(host=host, port=port, autocommit=True, **self.options)


# --- (a) overhead with no replicas --------------------------------------------------------------


def _primary_workload(conn: Any, table: str, statements: int) -> float:
    cur = conn.cursor()
    started = time.perf_counter()
    for i in range(statements // 2):
        k = i % 100
        cur.execute(f"SELECT v FROM {table} WHERE k = %s", (k,))
        cur.fetchall()
        cur.execute(f"UPDATE {table} SET v = v + 1 WHERE k = %s", (k,))
    return time.perf_counter() - started


def bench_overhead(topo: Topology, table: str, scale: int) -> dict[str, float]:
    raw = topo.raw()
    # Explicit telemetry: the environment must not change what is measured.
    disabled = Telemetry(TelemetryConfig(enabled=False))
    trace_dir = Path(tempfile.mkdtemp(prefix="consistent-bench-dbapi-"))
    tracing = Telemetry(
        TelemetryConfig(traces_exporters=("file",), trace_dir=trace_dir, service_name="bench")
    )
    conns: dict[str, Any] = {
        "raw": raw,
        "ours": topo.consistent(replicas=False, telemetry=disabled),
        "traced": topo.consistent(replicas=False, telemetry=tracing),
    }
    batch = 100
    rounds = max(4, int(40 * scale * topo.share))
    for conn in conns.values():  # warm the connections, the server and the trace file
        _primary_workload(conn, table, batch)
    tracing.flush()
    names = list(conns)
    ratios: list[float] = []
    traced_ratios: list[float] = []
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for run in range(rounds):  # short batches in rotating order: all see the same load
        for name in names[run % 3 :] + names[: run % 3]:
            started = time.process_time()
            seconds = _primary_workload(conns[name], table, batch)
            if name == "traced":
                flush_started = time.perf_counter()
                tracing.flush()  # the batch's spans exported: charged to the batch
                seconds += time.perf_counter() - flush_started
            wall[name].append(seconds)
            cpu[name].append(time.process_time() - started)
        ratios.append(wall["ours"][-1] / wall["raw"][-1])
        traced_ratios.append(wall["traced"][-1] / wall["ours"][-1])
    for conn in conns.values():
        conn.close()
    tracing.shutdown()
    disabled.shutdown()
    shutil.rmtree(trace_dir)
    return {
        "statements": batch * rounds,
        **side_by_side.per_statement(names, wall, cpu, batch),
        "ratio": statistics.median(ratios),
        "traced_ratio": statistics.median(traced_ratios),
        "dropped": tracing.dropped,
    }


# --- (b) read_own_writes read on a caught-up replica vs eventual -------------------------------


def _timed_reads(conn: db.Connection, table: str, reads: int) -> tuple[list[float], int]:
    cur = conn.cursor()
    samples: list[float] = []
    waits = 0
    for i in range(reads):
        started = time.perf_counter()
        cur.execute(f"SELECT v FROM {table} WHERE k = %s", (i % 100,))
        cur.fetchall()
        samples.append(time.perf_counter() - started)
        if side_by_side.replica_read_waited(conn):
            waits += 1
    return samples, waits


def bench_read_cost(topo: Topology, table: str, scale: int) -> dict[str, float]:
    row = topo.consistent(level="read_own_writes")
    eventual = topo.consistent(level="eventual")
    cur = row.cursor()
    update = f"UPDATE {table} SET v = v + 1 WHERE k = 0"
    cur.execute(update)  # the session now requires a GTID
    topo.replicate([update])
    _timed_reads(row, table, 50)  # the first read waits once; the replicas become known
    _timed_reads(eventual, table, 50)
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
            samples, waits = _timed_reads(conn, table, batch)
            medians[id(conn)] = statistics.median(samples)
            if conn is row:
                row_samples += samples
                row_waits += waits
            else:
                ev_samples += samples
        ratios.append(medians[id(row)] / medians[id(eventual)])
    row.close()
    eventual.close()
    return {
        "reads": len(row_samples),
        "row_us": statistics.median(row_samples) * 1e6,
        "eventual_us": statistics.median(ev_samples) * 1e6,
        "ratio": statistics.median(ratios),
        "row_waits": row_waits,
    }


# --- (c) write-then-read under lag --------------------------------------------------------------


def _injected_lag(topo: Topology, period: float = 0.06) -> contextlib.AbstractContextManager[None]:
    assert topo.pause is not None
    assert topo.resume is not None
    return injected_lag(topo.pause, topo.resume, len(topo.replicas), period)


def _write_then_read(conn: db.Connection, table: str, iterations: int) -> tuple[int, int, int]:
    cur = conn.cursor()
    violations = on_replicas = waits = 0
    for i in range(1, iterations + 1):
        value = 1_000_000 + i
        cur.execute(f"UPDATE {table} SET v = %s WHERE k = 1", (value,))
        cur.execute(f"SELECT v FROM {table} WHERE k = 1")
        if cur.fetchone() != (value,):
            violations += 1
        decision = conn.last_decision
        assert decision is not None
        if decision.target != PRIMARY:
            on_replicas += 1
        if decision.wait_set:
            waits += 1
    return violations, on_replicas, waits


def bench_lag(topo: Topology, table: str, scale: int) -> dict[str, float]:
    iterations = max(100, int(1000 * scale * topo.share))
    row = topo.consistent(level="read_own_writes", wait_timeout=1.0)
    eventual = topo.consistent(level="eventual")
    with _injected_lag(topo):
        started = time.perf_counter()
        violations, on_replicas, waits = _write_then_read(row, table, iterations)
        row_seconds = time.perf_counter() - started
        stale, ev_replicas, _ = _write_then_read(eventual, table, iterations)
    row.close()
    eventual.close()
    return {
        "iterations": iterations,
        "replica_share": on_replicas / iterations,
        "violations": violations,
        "waits": waits,
        "row_ms_per_iteration": row_seconds / iterations * 1e3,
        "eventual_violations": stale,
        "eventual_replica_share": ev_replicas / iterations,
    }


# --- backends -------------------------------------------------------------------------------------


@contextlib.contextmanager
def mariadb_topology() -> Iterator[Topology]:
    from consistent.testing.mariadb import start_topology

    topology = start_topology(replicas=2)
    try:
        topology.create_database("bench")
        params = topology.connection_params(database="bench").pymysql_kwargs()
        host, port = params.pop("host"), params.pop("port")
        yield Topology(
            name=f"MariaDB ({topology.describe()})",
            primary=(host, port),
            replicas=[(r.host, r.port) for r in topology.replicas],
            options=params,
            replicate=lambda _statements: topology.wait_for_all(),
            pause=topology.pause,
            resume=topology.resume,
        )
    finally:
        topology.close()


_EMULATOR_CHILD = """
import json, sys
from consistent.emulator import start_topology
with start_topology(replicas=2) as topology:
    topology.create_database("bench")
    print(json.dumps({
        "servers": [[e.host, e.port] for e in (topology.primary, *topology.replicas)],
        "user": topology.primary.user,
        "password": topology.primary.password,
        "describe": topology.describe().splitlines()[0],
    }), flush=True)
    sys.stdin.read()
"""


@contextlib.contextmanager
def emulator_topology() -> Iterator[Topology | None]:
    """The emulator's own primary + 2 replicas (``consistent.emulator.start_topology``), run in
    a child process so that the servers do not share this process's CPU and GIL with the
    client being measured.  Lag is injected with ``STOP/START REPLICA SQL_THREAD``."""
    emulator = importlib.import_module("consistent.emulator")
    if getattr(emulator, "start_topology", None) is None:
        yield None
        return
    child = subprocess.Popen(
        [sys.executable, "-c", _EMULATOR_CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    admins: list[Any] = []
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        if not line.strip():
            raise RuntimeError("the emulator child process did not start")
        info = json.loads(line)
        (primary, *replicas) = [(host, int(port)) for host, port in info["servers"]]
        credentials = {"user": info["user"], "password": info["password"]}
        admins = [
            pymysql.connect(host=h, port=p, autocommit=True, **credentials) for h, p in replicas
        ]

        def replica_sql(index: int, sql: str) -> None:
            with admins[index].cursor() as cur:
                cur.execute(sql)

        def catch_up(_statements: list[str]) -> None:
            with (
                contextlib.closing(
                    pymysql.connect(host=primary[0], port=primary[1], **credentials)
                ) as conn,
                conn.cursor() as cur,
            ):
                cur.execute("SELECT @@GLOBAL.gtid_executed")
                row = cur.fetchone()
            executed = str(row[0]) if row else ""
            for admin in admins:
                with admin.cursor() as cur:
                    cur.execute("SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, 10)", (executed,))

        yield Topology(
            name=f"emulator, child process ({info['describe']})",
            primary=primary,
            replicas=replicas,
            options={**credentials, "database": "bench"},
            replicate=catch_up,
            pause=lambda i: replica_sql(i, "STOP REPLICA SQL_THREAD"),
            resume=lambda i: replica_sql(i, "START REPLICA SQL_THREAD"),
            share=0.25,  # an emulated write costs milliseconds: a quarter of the workload
        )
    finally:
        for admin in admins:
            admin.close()
        if child.stdin is not None:
            child.stdin.close()
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def prepare(topo: Topology, table: str) -> None:
    statements = [
        f"DROP TABLE IF EXISTS {table}",
        f"CREATE TABLE {table} (k INT PRIMARY KEY, v BIGINT NOT NULL)",
        f"INSERT INTO {table} VALUES " + ",".join(f"({k}, 0)" for k in range(100)),
    ]
    raw = topo.raw()
    with contextlib.closing(raw), raw.cursor() as cur:
        for sql in statements:
            cur.execute(sql)
    topo.replicate(statements)


def run(topo: Topology, scale: int) -> dict[str, Any]:
    """Print (a), (b) and (c) on ``topo`` and return their figures."""
    print(f"\n== {topo.name}")
    prepare(topo, "bench_kv")
    b = bench_read_cost(topo, "bench_kv", scale)
    print(
        f"(b) read_own_writes on a caught-up replica vs eventual, {b['reads']:.0f} reads each: "
        f"{b['row_us']:.0f} us vs {b['eventual_us']:.0f} us (medians), "
        f"ratio {b['ratio']:.3f}x (median of paired batches; target <= 1.10x), "
        f"waits {b['row_waits']:.0f} (target 0)"
    )
    a = bench_overhead(topo, "bench_kv", scale)
    print(
        f"(a) no replicas vs raw PyMySQL, {a['statements']:.0f} statements each in "
        "alternating batches of 100: "
        f"raw {a['raw_us']:.0f} us/stmt, consistent {a['ours_us']:.0f} us/stmt, "
        f"ratio {a['ratio']:.3f}x (median of paired batches; target <= 1.05x); "
        f"client CPU {a['raw_cpu_us']:.1f} vs {a['ours_cpu_us']:.1f} us/stmt"
    )
    print(
        f"(a) tracing on vs off, same workload and batches: traced {a['traced_us']:.0f} us/stmt, "
        f"ratio {a['traced_ratio']:.3f}x (median of batches; target <= 1.05x); client CPU "
        f"{a['traced_cpu_us']:.1f} us/stmt (exporter threads included); "
        f"{a['dropped']:.0f} spans dropped"
    )
    if topo.pause is None:
        print("(c) not run: this backend cannot lag a replica")
        return {"name": topo.name, "a": a, "b": b, "c": None}
    prepare(topo, "bench_kv")
    c = bench_lag(topo, "bench_kv", scale)
    print(
        f"(c) write-then-read x {c['iterations']:.0f} under 60 ms applier pauses, "
        f"wait_timeout 1 s: replica share {c['replica_share']:.1%} (target >= 95%), "
        f"RYW violations {c['violations']:.0f} (target 0), "
        f"{c['waits']:.0f} reads waited, {c['row_ms_per_iteration']:.2f} ms/iteration; "
        f"control at eventual: {c['eventual_violations']:.0f} stale reads "
        f"({c['eventual_replica_share']:.0%} on replicas)"
    )
    return {"name": topo.name, "a": a, "b": b, "c": c}


def main(argv: list[str] | None = None) -> int:
    topologies = {"emulator": emulator_topology, "mariadb": mariadb_topology}
    description = __doc__.split("\n\n")[0]
    return side_by_side.main(
        argv, description, driver="pymysql", distribution="PyMySQL", run=run, topologies=topologies
    )


if __name__ == "__main__":
    sys.exit(main())
