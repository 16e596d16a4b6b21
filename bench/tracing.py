"""What tracing costs a statement in the DB-API wrapper, measured side by side in one run.

Run: ``.venv/bin/python bench/tracing.py [--block N] [--rounds N] [--json PATH]``.

Workload (a) of ``bench/dbapi.py`` (point SELECTs and UPDATEs by primary key, autocommit,
through ``consistent.connect`` with no replicas) against a real MariaDB primary started with
``consistent.testing.mariadb``, on three connections to the same server:

* **pymysql**: raw PyMySQL, the reference (what the wrapper itself adds is ``off / pymysql``);
* **off**: ``consistent.connect(telemetry=...)`` with telemetry disabled: every span is the
  shared no-op one;
* **on**: ``consistent.connect(telemetry=...)`` recording every statement to an OTLP-JSON lines
  file.  Each block's time includes flushing its spans to the file.

The spans are the wrapper's own (``Connection`` and ``Cursor`` open them); this bench makes no
span call.  Modes run in short blocks in rotating order, so that all see the same drift of a
shared machine's load; each ratio is the median of per-round ratios (and the ratio of totals).
Target: ``on / off`` at most 1.05x.  Because wall-clock ratios scatter on a busy machine, the
bench also prints CPU per statement on the statement's thread, where the tracing cost that a
statement waits for is spent, and for the whole process (exporter threads included).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pymysql

import consistent.dbapi as db
from consistent.policy import ReplicaKnowledge
from consistent.telemetry import Telemetry, TelemetryConfig

TABLE = "bench_tracing.kv"
MODES = ("pymysql", "off", "on")


def _setup(params: dict[str, Any]) -> None:
    conn = pymysql.connect(autocommit=True, **params)
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS bench_tracing")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (k INT PRIMARY KEY, v INT NOT NULL)")
        cur.execute(
            f"INSERT IGNORE INTO {TABLE} VALUES " + ",".join(f"({k}, 0)" for k in range(100))
        )
    conn.close()


def _workload(conn: Any, statements: int) -> None:
    """``statements`` statements: half point SELECTs, half point UPDATEs."""
    cur = conn.cursor()
    select = f"SELECT v FROM {TABLE} WHERE k = %s"
    update = f"UPDATE {TABLE} SET v = v + 1 WHERE k = %s"
    for i in range(statements // 2):
        k = i % 100
        cur.execute(select, (k,))
        cur.fetchall()
        cur.execute(update, (k,))


# How a statement record's kind is written (its span name is the statement's operation).
_STATEMENT_RECORD = '{"key":"consistent.record.kind","value":{"stringValue":"statement"}}'


def _spans_in(directory: Path) -> int:
    """Statement spans written to the trace files of ``directory`` (lines hold batches)."""
    return sum(
        path.read_text(encoding="utf-8").count(_STATEMENT_RECORD)
        for path in directory.glob("*.jsonl")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block", type=int, default=500, help="statements per timed block")
    parser.add_argument("--rounds", type=int, default=60, help="rounds of one block per mode")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)

    from consistent.testing.mariadb import start_topology

    load_before = os.getloadavg()
    trace_dir = Path(tempfile.mkdtemp(prefix="consistent-bench-tracing-"))
    tracing = Telemetry(
        TelemetryConfig(traces_exporters=("file",), trace_dir=trace_dir, service_name="bench")
    )
    disabled = Telemetry(TelemetryConfig(enabled=False))
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    thread_cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
    process_cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
    statements_on = 0
    with start_topology(replicas=1) as topo:
        params = topo.connection_params().pymysql_kwargs()
        _setup(params)
        common = {
            "primary": f"{params['host']}:{params['port']}",
            "replicas": [],
            "user": params["user"],
            "password": params["password"],
            "ssl_disabled": True,
            "knowledge": ReplicaKnowledge(),
        }
        conns: dict[str, Any] = {
            "pymysql": pymysql.connect(autocommit=True, **params),
            "off": db.connect(telemetry=disabled, **common),
            "on": db.connect(telemetry=tracing, **common),
        }
        session = conns["on"].tracer.session_id
        assert session, "tracing is not on for the traced connection"
        assert not conns["off"].tracer.enabled

        def run(mode: str, n: int, record: bool = True) -> None:
            nonlocal statements_on
            started = time.perf_counter()
            process = time.process_time()
            thread = time.thread_time()
            _workload(conns[mode], n)
            thread_used = time.thread_time() - thread
            if mode == "on":
                statements_on += n
                # Conservative: the block's time includes exporting every one of its spans
                # (what the exporter threads did during the block, and what was left).
                tracing.flush()
            if record:
                times[mode].append(time.perf_counter() - started)
                thread_cpu[mode].append(thread_used)
                process_cpu[mode].append(time.process_time() - process)

        for mode in MODES:  # warm the connections, the server's caches, the trace file
            run(mode, 400, record=False)
        for r in range(args.rounds):
            # Short blocks in rotating order: the machine's load drifts, and every mode
            # sees the same drift.
            order = MODES[r % 3 :] + MODES[: r % 3]
            for mode in order:
                run(mode, args.block)
        for conn in conns.values():
            conn.close()
    tracing.shutdown()
    disabled.shutdown()
    load_after = os.getloadavg()
    written = _spans_in(trace_dir)
    size = sum(p.stat().st_size for p in trace_dir.glob("*.jsonl"))
    shutil.rmtree(trace_dir)

    def ratio(a: str, b: str) -> tuple[float, float]:
        per_round = statistics.median(x / y for x, y in zip(times[a], times[b], strict=True))
        return per_round, sum(times[a]) / sum(times[b])

    def per_statement(samples: list[float]) -> float:
        return float(sum(samples) / (args.block * len(samples)) * 1e6)

    print(
        f"workload (a): {args.rounds} rounds x {args.block} statements per mode (point SELECT "
        f"+ UPDATE by primary key, autocommit), MariaDB primary {params['host']}:"
        f"{params['port']}; spans from consistent.connect's own wiring"
    )
    print(
        f"load average before {' '.join(f'{x:.2f}' for x in load_before)}, "
        f"after {' '.join(f'{x:.2f}' for x in load_after)} ({os.cpu_count()} CPUs)"
    )
    modes: dict[str, dict[str, float]] = {}
    for mode in MODES:
        wall = statistics.median(times[mode]) / args.block * 1e6
        modes[mode] = {
            "us_per_statement": wall,
            "thread_cpu_us": per_statement(thread_cpu[mode]),
            "process_cpu_us": per_statement(process_cpu[mode]),
        }
        print(
            f"  {mode:>7}: {wall:7.1f} us/statement (median block); CPU per statement: "
            f"{per_statement(thread_cpu[mode]):5.1f} us statement thread, "
            f"{per_statement(process_cpu[mode]):5.1f} us whole process"
        )
    on_off = ratio("on", "off")
    off_raw = ratio("off", "pymysql")
    print(
        f"tracing on / off : {on_off[0]:.3f}x median of rounds, {on_off[1]:.3f}x totals "
        "(target <= 1.05x)"
    )
    print(
        f"tracing off / raw PyMySQL: {off_raw[0]:.3f}x median of rounds, {off_raw[1]:.3f}x "
        "totals (the wrapper with tracing off; target <= 1.05x)"
    )
    extra = per_statement(thread_cpu["on"]) - per_statement(thread_cpu["off"])
    off_wall = statistics.median(times["off"]) / args.block * 1e6
    print(
        f"tracing's CPU on the statement thread: {extra:.1f} us per statement, "
        f"{(off_wall + extra) / off_wall:.3f}x of the off statement time"
    )
    print(
        f"spans written: {written} of {statements_on} traced statements, dropped "
        f"{tracing.dropped}; trace file: {size / 1e6:.1f} MB (removed)"
    )
    if args.json:
        payload = {
            "block": args.block,
            "rounds": args.rounds,
            "cpus": os.cpu_count(),
            "load_before": list(load_before),
            "load_after": list(load_after),
            "modes": modes,
            "on_off_ratio": on_off[0],
            "on_off_ratio_totals": on_off[1],
            "off_raw_ratio": off_raw[0],
            "off_raw_ratio_totals": off_raw[1],
            "thread_cpu_extra_us": extra,
            "spans_written": written,
            "statements_traced": statements_on,
            "dropped": tracing.dropped,
            "trace_bytes": size,
        }
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(payload, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
