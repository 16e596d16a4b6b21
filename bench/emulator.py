"""The emulator's speed over the wire, side by side with a real server.

Run: ``.venv/bin/python bench/emulator.py [--backend emulator|mariadb|all] [--queries N]
[--rounds R] [--in-process] [--dbapi N] [--json PATH]``.

Against each backend, PyMySQL over TCP on 127.0.0.1 (autocommit), one connection:

* ``select1``: ``SELECT 1``;
* ``point``: ``SELECT v FROM bench_t WHERE k = <k>`` on a 1,000-row table, ``k`` varying;
* ``insert``: ``INSERT INTO bench_w (v) VALUES (<i>)`` into an ``AUTO_INCREMENT`` table.

Each workload runs ``--rounds`` times (rounds alternate between workloads); the figure is the
best round's queries per second, so that a busy machine distorts it least.  Beside it, the
server's CPU time per query (from ``/proc/<pid>/stat``, median over rounds), which does not
depend on how loaded the machine is.  The emulator runs in a child process, as mysqld would
(``--in-process``: in a thread of this process, as the test suite runs it; its CPU time is
then not separated from the client's).  MariaDB comes from
``consistent.testing.mariadb.start_topology(replicas=0)`` when its binaries are installed.
The last column is how many times faster MariaDB is.

``--dbapi N`` also times N write-then-read iterations through ``consistent.dbapi`` on
``consistent.emulator.start_topology(replicas=2)`` in this process (what ``tests/dbapi``
does), at ``eventual`` and at ``read_own_writes``: milliseconds per iteration, and per write
and per read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pymysql

WORKLOADS = ("select1", "point", "insert")
ROWS = 1000
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Server:
    """A server to measure: where it listens and which process does its work."""

    name: str
    connect: Callable[[], Any]
    pid: int | None


@dataclass
class Figures:
    """One workload's results on one backend."""

    qps: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)

    @property
    def best_qps(self) -> float:
        return max(self.qps) if self.qps else 0.0

    @property
    def median_cpu_us(self) -> float | None:
        return statistics.median(self.cpu_us) if self.cpu_us else None


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


# --- servers -------------------------------------------------------------------------------------


def serve_forever() -> None:
    """Child mode: run one emulated server, print its port, stop when stdin closes."""
    from consistent.emulator.wire.thread import EmulatorThread

    with EmulatorThread(fast_loop=True) as emu:
        print(emu.port, flush=True)
        sys.stdin.read()


@contextlib.contextmanager
def emulator_server(in_process: bool) -> Iterator[Server]:
    if in_process:
        from consistent.emulator.wire.thread import EmulatorThread

        with EmulatorThread() as emu:
            yield Server("emulator (thread)", lambda: _connect(emu.port, "root", ""), None)
        return
    child = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        yield Server("emulator", lambda: _connect(port, "root", ""), child.pid)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


@contextlib.contextmanager
def mariadb_server() -> Iterator[Server | None]:
    from consistent.testing import mariadb

    try:
        topology = mariadb.start_topology(replicas=0)
    except Exception as exc:  # binaries missing or the start failed: measure what we can
        print(f"MariaDB not measured: {exc}", file=sys.stderr)
        yield None
        return
    try:
        params = topology.connection_params()
        yield Server(
            "mariadb",
            lambda: _connect(params.port, params.user, params.password),
            topology.primary.pid,
        )
    finally:
        topology.close()


def _connect(port: int, user: str, password: str) -> Any:
    return pymysql.connect(
        host="127.0.0.1", port=port, user=user, password=password, autocommit=True
    )


# --- workloads -----------------------------------------------------------------------------------


def prepare(conn: Any, database: str) -> None:
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE {database}")
    cur.execute(f"USE {database}")
    cur.execute("CREATE TABLE bench_t (k INT PRIMARY KEY, v VARCHAR(40) NOT NULL)")
    rows = ", ".join(f"({k}, 'value {k}')" for k in range(ROWS))
    cur.execute(f"INSERT INTO bench_t VALUES {rows}")
    cur.execute("CREATE TABLE bench_w (id INT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL)")


def statements(workload: str, start: int, count: int) -> list[str]:
    if workload == "select1":
        return ["SELECT 1"] * count
    if workload == "point":
        return [
            f"SELECT v FROM bench_t WHERE k = {(i * 7919) % ROWS}"
            for i in range(start, start + count)
        ]
    return [f"INSERT INTO bench_w (v) VALUES ({i})" for i in range(start, start + count)]


def run_round(conn: Any, texts: list[str]) -> float:
    cur = conn.cursor()
    started = time.perf_counter()
    for text in texts:
        cur.execute(text)
        cur.fetchall()
    return time.perf_counter() - started


def measure(server: Server, queries: int, rounds: int) -> dict[str, Figures]:
    conn = server.connect()
    prepare(conn, f"bench_{secrets.token_hex(4)}")
    figures = {w: Figures() for w in WORKLOADS}
    for workload in WORKLOADS:  # warm up: caches, the first shape of each statement
        run_round(conn, statements(workload, 0, max(queries // 10, 20)))
    for r in range(rounds):
        for workload in WORKLOADS:
            texts = statements(workload, (r + 1) * queries, queries)
            cpu = process_cpu(server.pid) if server.pid else None
            seconds = run_round(conn, texts)
            figures[workload].qps.append(queries / seconds)
            if cpu is not None and server.pid:
                used = process_cpu(server.pid) - cpu
                figures[workload].cpu_us.append(used / queries * 1e6)
    conn.close()
    return figures


# --- DB-API write-then-read ----------------------------------------------------------------------


def dbapi_iterations(iterations: int) -> dict[str, dict[str, float]]:
    """ms per write-then-read iteration through consistent.dbapi on the emulated topology."""
    import consistent.dbapi as db
    from consistent.emulator import start_topology
    from consistent.policy import ReplicaKnowledge

    results: dict[str, dict[str, float]] = {}
    with start_topology(replicas=2) as topology:
        topology.create_database("bench_dbapi")
        params = topology.connection_params(None, "bench_dbapi")
        options = params.pymysql_kwargs()
        del options["host"], options["port"]
        replicas = [r.address for r in topology.replicas]
        setup = topology.connect(None, "bench_dbapi")
        setup.cursor().execute("CREATE TABLE kv (k INT PRIMARY KEY, v INT NOT NULL)")
        setup.cursor().execute("INSERT INTO kv VALUES (1, 0)")
        setup.close()
        topology.wait_for_all()
        for level in ("eventual", "read_own_writes"):
            conn = db.connect(
                primary=params.address,
                replicas=replicas,
                knowledge=ReplicaKnowledge(),
                level=level,
                **options,
            )
            cur = conn.cursor()
            write = read = 0.0
            for i in range(1, iterations + 1):
                a = time.perf_counter()
                cur.execute("UPDATE kv SET v = %s WHERE k = 1", (i,))
                b = time.perf_counter()
                cur.execute("SELECT v FROM kv WHERE k = 1")
                cur.fetchall()
                write += b - a
                read += time.perf_counter() - b
            conn.close()
            results[level] = {
                "iteration_ms": (write + read) / iterations * 1e3,
                "write_ms": write / iterations * 1e3,
                "read_ms": read / iterations * 1e3,
            }
    return results


# --- report --------------------------------------------------------------------------------------


def _fmt_cpu(value: float | None) -> str:
    return f"{value:8.0f}" if value is not None else "       -"


def report(results: dict[str, dict[str, Figures]]) -> None:
    names = list(results)
    header = f"{'workload':<10}" + "".join(f"{n + ' qps':>24}{'cpu us/q':>10}" for n in names)
    if len(names) == 2:
        header += f"{'ratio':>8}"
    print(header)
    for workload in WORKLOADS:
        line = f"{workload:<10}"
        for name in names:
            figures = results[name][workload]
            line += f"{figures.best_qps:24.0f}{_fmt_cpu(figures.median_cpu_us)}  "
        if len(names) == 2:
            emu, real = (results[n][workload].best_qps for n in names)
            line += f"{real / emu:8.1f}x" if emu else ""
        print(line)


def figures_json(
    results: dict[str, dict[str, Figures]], dbapi: dict[str, dict[str, float]]
) -> dict[str, Any]:
    """The figures of a run as one JSON-ready object."""
    out: dict[str, Any] = {
        "backends": {
            name: {
                w: {"qps": f.best_qps, "cpu_us_per_query": f.median_cpu_us}
                for w, f in figures.items()
            }
            for name, figures in results.items()
        },
        "dbapi": dbapi,
    }
    if len(results) == 2:
        emu, real = results.values()
        out["mariadb_over_emulator"] = {
            w: real[w].best_qps / emu[w].best_qps for w in WORKLOADS if emu[w].best_qps
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["emulator", "mariadb", "all"], default="all")
    parser.add_argument("--queries", type=int, default=2000, help="queries per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--in-process", action="store_true", help="emulator in a thread")
    parser.add_argument("--dbapi", type=int, default=0, metavar="N", help="DB-API iterations")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_forever()
        return
    results: dict[str, dict[str, Figures]] = {}
    if args.backend in ("emulator", "all"):
        with emulator_server(args.in_process) as server:
            results[server.name] = measure(server, args.queries, args.rounds)
    if args.backend in ("mariadb", "all"):
        with mariadb_server() as maria:
            if maria is not None:
                results[maria.name] = measure(maria, args.queries, args.rounds)
    dbapi = dbapi_iterations(args.dbapi) if args.dbapi else {}
    report(results)
    for level, figures in dbapi.items():
        print(
            f"dbapi {level:<16} {figures['iteration_ms']:6.2f} ms/iteration "
            f"(write {figures['write_ms']:.2f} ms, read {figures['read_ms']:.2f} ms)"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(figures_json(results, dbapi), out, indent=2)


if __name__ == "__main__":
    main()
