"""What tracing costs a statement, measured side by side in one run.

Run: ``.venv/bin/python bench/tracing.py [--scale N] [--runs N]``.

Workload (a) of ``bench/dbapi.py`` (point SELECTs and UPDATEs by primary key, autocommit,
through ``consistent.connect`` with no replicas) against a real MariaDB primary started with
``consistent.testing.mariadb``, three ways:

* **bare**: no span calls at all;
* **off**: the span calls with tracing off (the shared no-op tracer);
* **on**: tracing on, recording every statement to an OTLP-JSON lines file.

Modes alternate in short blocks and each ratio is the median of per-round ratios (and the
ratio of totals).  Targets: ``on / off`` at most 1.05x, ``off / bare`` indistinguishable from
1.00x.  On a machine shared with other work the per-round ratios scatter widely, so the bench
also prints what one span costs in CPU without a server (on the statement's thread, and on the
exporter threads), and the ratio that cost implies for the measured statement time.

When ``consistent.connect`` accepts ``telemetry=`` the wrapper records the spans itself;
otherwise the bench makes the span calls around each statement, as the wrapper does.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import consistent.dbapi as db
from consistent.policy import PRIMARY, ReplicaKnowledge
from consistent.telemetry import NOOP_TRACER, StatementTracer, Telemetry, TelemetryConfig

TABLE = "bench_tracing.kv"


def _setup(params: dict[str, Any]) -> None:
    import pymysql

    conn = pymysql.connect(autocommit=True, **params)
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS bench_tracing")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (k INT PRIMARY KEY, v INT NOT NULL)")
        cur.execute(
            f"INSERT IGNORE INTO {TABLE} VALUES " + ",".join(f"({k}, 0)" for k in range(100))
        )
    conn.close()


def _workload(conn: Any, tracer: StatementTracer | None, statements: int) -> float:
    """Seconds for ``statements`` statements; ``tracer`` set: span calls around each one."""
    cur = conn.cursor()
    select = f"SELECT v FROM {TABLE} WHERE k = %s"
    update = f"UPDATE {TABLE} SET v = v + 1 WHERE k = %s"
    started = time.perf_counter()
    if tracer is None:
        for i in range(statements // 2):
            k = i % 100
            cur.execute(select, (k,))
            cur.fetchall()
            cur.execute(update, (k,))
    else:
        for i in range(statements // 2):
            k = i % 100
            with tracer.statement(select) as span:
                cur.execute(select, (k,))
                cur.fetchall()
                span.route(PRIMARY, "no_replicas")
            with tracer.statement(update) as span:
                cur.execute(update, (k,))
                span.route(PRIMARY, "no_replicas")
    return time.perf_counter() - started


def span_cost(trace_dir: Path, spans: int = 20_000) -> tuple[float, float]:
    """CPU seconds per span with tracing on and no server: on the statement's thread, and on
    the telemetry threads (exporting every span to the file included)."""
    config = TelemetryConfig(
        traces_exporters=("file",),
        trace_dir=trace_dir,
        service_name="bench",
        max_queue_size=spans + 1,  # no statement waits here: keep every span, drop none
        writer_queue_batches=spans,
    )
    telemetry = Telemetry(config)
    tracer = telemetry.session(system="mariadb")
    sql = f"SELECT v FROM {TABLE} WHERE k = 42"
    telemetry.flush()
    process = time.process_time()
    thread = time.thread_time()
    for _ in range(spans):
        with tracer.statement(sql) as span:
            span.route(PRIMARY, "no_replicas")
    statement_thread = time.thread_time() - thread
    telemetry.flush()
    others = time.process_time() - process - (time.thread_time() - thread)
    telemetry.shutdown()
    assert telemetry.dropped == 0
    return statement_thread / spans, others / spans


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block", type=int, default=500, help="statements per timed block")
    parser.add_argument("--rounds", type=int, default=60, help="rounds of one block per mode")
    args = parser.parse_args(argv)

    from consistent.testing.mariadb import start_topology

    wired = "telemetry" in inspect.signature(db.connect).parameters
    trace_dir = Path(tempfile.mkdtemp(prefix="consistent-bench-tracing-"))
    telemetry = Telemetry(
        TelemetryConfig(traces_exporters=("file",), trace_dir=trace_dir, service_name="bench")
    )
    with start_topology(replicas=1) as topo:
        params = topo.connection_params().pymysql_kwargs()
        _setup(params)
        common = {
            "primary": f"{params['host']}:{params['port']}",
            "replicas": [],
            "user": params["user"],
            "password": params["password"],
            "ssl_disabled": True,
        }

        def open_conn(traced: bool) -> Any:
            if wired:
                chosen = telemetry if traced else Telemetry(TelemetryConfig(enabled=False))
                return db.connect(knowledge=ReplicaKnowledge(), telemetry=chosen, **common)
            return db.connect(knowledge=ReplicaKnowledge(), **common)

        session = telemetry.session(
            system="mariadb", addresses={PRIMARY: (params["host"], params["port"])}
        )
        conns = {"bare": open_conn(False), "off": open_conn(False), "on": open_conn(True)}
        tracers: dict[str, StatementTracer | None] = {
            "bare": None,
            "off": None if wired else NOOP_TRACER,
            "on": None if wired else session,
        }

        def run(mode: str, n: int) -> float:
            started = time.perf_counter()
            cpu = time.process_time()
            _workload(conns[mode], tracers[mode], n)
            if mode == "on":
                # Conservative: the block's time includes exporting every one of its spans
                # (what the exporter threads did during the block, and what was left).
                telemetry.flush()
            cpu_times[mode].append(time.process_time() - cpu)
            return time.perf_counter() - started

        modes = list(conns)
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        cpu_times: dict[str, list[float]] = {mode: [] for mode in modes}
        for mode in modes:  # warm the connections, the server's caches, the trace file
            run(mode, 400)
        for mode in modes:
            cpu_times[mode].clear()
        for r in range(args.rounds):
            # Short blocks in rotating order: the machine's load drifts, and every mode
            # sees the same drift.
            for mode in modes[r % 3 :] + modes[: r % 3]:
                times[mode].append(run(mode, args.block))
        for conn in conns.values():
            conn.close()
    telemetry.shutdown()
    dropped = telemetry.dropped
    costs = [span_cost(trace_dir / "cost") for _ in range(3)]
    size = sum(p.stat().st_size for p in trace_dir.glob("*.jsonl"))

    def ratio(a: str, b: str) -> tuple[float, float]:
        per_round = statistics.median(x / y for x, y in zip(times[a], times[b], strict=True))
        return per_round, sum(times[a]) / sum(times[b])

    def cpu_ratio(a: str, b: str) -> float:
        return sum(cpu_times[a]) / sum(cpu_times[b])

    print(
        f"workload (a): {args.rounds} rounds x {args.block} primary statements per mode "
        f"(point SELECT + UPDATE by primary key), MariaDB {params['host']}:{params['port']}"
    )
    where = "inside consistent.connect" if wired else "around each statement (not wired yet)"
    print(f"span calls: {where}")
    for mode in modes:
        per = statistics.median(times[mode]) / args.block * 1e6
        cpu = sum(cpu_times[mode]) / (args.block * len(cpu_times[mode])) * 1e6
        print(f"  {mode:>4}: {per:8.1f} us/statement (median block), client CPU {cpu:.1f} us")
    on_off = ratio("on", "off")
    off_bare = ratio("off", "bare")
    print(
        f"tracing on / off : {on_off[0]:.3f}x median of rounds, {on_off[1]:.3f}x totals "
        "(target <= 1.05x)"
    )
    print(
        f"tracing off / bare: {off_bare[0]:.3f}x median of rounds, {off_bare[1]:.3f}x totals "
        "(target 1.00x)"
    )
    print(
        f"client CPU (all threads) on / off: {cpu_ratio('on', 'off'):.3f}x, "
        f"off / bare: {cpu_ratio('off', 'bare'):.3f}x (an upper bound: the server's time is "
        "not in it)"
    )
    on_thread = min(c[0] for c in costs) * 1e6
    exporters = min(c[1] for c in costs) * 1e6
    off_median = statistics.median(times["off"]) / args.block * 1e6
    print(
        f"one span without a server: {on_thread:.1f} us CPU on the statement's thread + "
        f"{exporters:.1f} us on the exporter threads; against {off_median:.0f} us per "
        f"statement that implies {(off_median + on_thread + exporters) / off_median:.3f}x "
        f"(all of it serialised) or {(off_median + on_thread) / off_median:.3f}x (exporter "
        "threads on an idle core)"
    )
    print(f"dropped spans: {dropped}; trace file: {size / 1e6:.1f} MB in {trace_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
