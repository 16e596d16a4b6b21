"""What server faults cost a session, with and without the fault, side by side in one run.

Run: ``.venv/bin/python bench/faults.py [--form wrapper|proxy|all] [--seconds N] [--json PATH]``.

On a real MariaDB primary with two replicas (``consistent.testing.mariadb``), through the DB-API
wrapper and through the proxy, with the same settings for both (``wait_timeout`` 1 s, replica
connect timeout 2 s, ``replica_read_timeout`` 5 s: the defaults but for the proxy's connect
timeout; monitor every 0.2 s).  Each session writes a row and reads it back
(``read_own_writes``), over and over; each fault run has a baseline run of the same length
without the fault:

(a) **a black-hole replica**: a third replica that accepts TCP connections and never answers.
    Worst and p99 read latency, and whether the worst stays within the bound the deadlines
    promise, ``wait_timeout + replica_read_timeout + connect_timeout``.
(b) **a frozen replica**: one replica stopped with SIGSTOP for ``--freeze`` seconds (longer
    than ``replica_read_timeout``) in the middle of the run.  Worst and p99 read latency; also
    for a session that only reads (it requires nothing, so its reads go to the replicas with no
    wait: what the replica was sent is a read, and the read deadline ends it).
(c) **a replica stuck behind wait_timeout**: the only replica delayed by ``MASTER_DELAY`` = 3 s.
    Reads per second, against the same replica undelayed, and how many reads took a full
    ``wait_timeout`` (after a 2 s warm-up in which the monitor learns the lag).
(d) **a restarted replica**: a replica killed (SIGKILL) and restarted; the seconds from the
    moment it replicates again and has caught up to the first read it serves, against the
    monitor interval.

``--json PATH`` writes ``{"settings": {...}, "bound_ms", "forms": {"wrapper"|"proxy":
{"black_hole"|"frozen"|"frozen_reads": {"without", "with"}, "stuck": {"without", "with"},
"restart": {...}}}}``
where ``without``/``with`` hold ``reads``, ``worst_ms``, ``p99_ms`` (or ``reads_per_s``,
``slow_reads``), and ``restart`` holds ``seconds_to_serve`` and ``monitor_interval``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

# Run as a script, this file's directory comes first on sys.path, and bench/proxy.py would hide
# the proxy package: put the project's root first.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

import pymysql  # noqa: E402

import consistent.dbapi as db  # noqa: E402
from consistent.policy import ReplicaKnowledge  # noqa: E402
from consistent.testing.blackhole import BlackHole  # noqa: E402
from consistent.testing.mariadb import MariaDBTopology, start_topology  # noqa: E402
from proxy.config import parse  # noqa: E402
from proxy.testing import ProxyThread  # noqa: E402

WAIT_TIMEOUT: Final = 1.0
CONNECT_TIMEOUT: Final = 2.0
REPLICA_READ_TIMEOUT: Final = 5.0
MONITOR_INTERVAL: Final = 0.2
DELAY_SECONDS: Final = 3
TABLE: Final = "faults_kv"
BOUND: Final = WAIT_TIMEOUT + REPLICA_READ_TIMEOUT + CONNECT_TIMEOUT


@dataclass
class Session:
    """One session through one form: run a statement, get its rows."""

    cursor: Callable[[], Any]
    closers: list[Callable[[], None]] = field(default_factory=list)

    def rows(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        with contextlib.closing(self.cursor()) as cur:
            cur.execute(sql, args)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []

    def close(self) -> None:
        for close in reversed(self.closers):
            with contextlib.suppress(Exception):
                close()


def open_wrapper(topo: MariaDBTopology, replicas: list[str]) -> Session:
    params = topo.connection_params(database="bench").pymysql_kwargs()
    params.pop("host")
    params.pop("port")
    conn = db.connect(
        primary=f"127.0.0.1:{topo.primary.port}",
        replicas=replicas,
        knowledge=ReplicaKnowledge(),
        wait_timeout=WAIT_TIMEOUT,
        replica_connect_timeout=CONNECT_TIMEOUT,
        replica_read_timeout=REPLICA_READ_TIMEOUT,
        monitor_interval=MONITOR_INTERVAL,
        **params,
    )
    return Session(conn.cursor, [conn.close])


def open_proxy(topo: MariaDBTopology, replicas: list[str]) -> Session:
    config = parse(
        {
            "listen": "127.0.0.1:0",
            "wait_timeout": WAIT_TIMEOUT,
            "backends": {
                "primary": f"127.0.0.1:{topo.primary.port}",
                "replicas": replicas,
                "user": topo.app_user,
                "password": topo.app_password,
                "connect_timeout": CONNECT_TIMEOUT,
                "replica_read_timeout": REPLICA_READ_TIMEOUT,
                "monitor_interval_ms": MONITOR_INTERVAL * 1000,
            },
            "users": {"app": {"password": "app-secret"}},
        }
    )
    proxy = ProxyThread(config, knowledge=ReplicaKnowledge()).start()
    conn = pymysql.connect(
        host="127.0.0.1",
        port=proxy.port,
        user="app",
        password="app-secret",
        database="bench",
        autocommit=True,
        read_timeout=120,
    )
    return Session(conn.cursor, [proxy.stop, conn.close])


OPENERS: Final[dict[str, Callable[[MariaDBTopology, list[str]], Session]]] = {
    "wrapper": open_wrapper,
    "proxy": open_proxy,
}


@contextlib.contextmanager
def session(form: str, topo: MariaDBTopology, replicas: list[str]) -> Iterator[Session]:
    opened = OPENERS[form](topo, replicas)
    try:
        yield opened
    finally:
        opened.close()


@dataclass
class Run:
    """Read latencies of a write-then-read loop, and where the reads ran."""

    latencies: list[float] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def figures(self) -> dict[str, float]:
        ordered = sorted(self.latencies)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return {
            "reads": len(ordered),
            "worst_ms": ordered[-1] * 1000,
            "p99_ms": p99 * 1000,
            "median_ms": statistics.median(ordered) * 1000,
            "reads_per_s": len(ordered) / self.seconds,
            "slow_reads": sum(1 for x in ordered if x >= 0.9 * WAIT_TIMEOUT),
        }


def loop(s: Session, seconds: float, *, run: Run | None = None, writes: bool = True) -> Run:
    """Write then read row 1 back for ``seconds``, every read checked; with ``writes`` false,
    only read it (the session then requires nothing: no read waits)."""
    run = run if run is not None else Run()
    started = time.monotonic()
    value = 0
    while time.monotonic() - started < seconds:
        if writes:
            value = int(time.monotonic_ns() % 1_000_000_000)
            s.rows(f"UPDATE {TABLE} SET v = %s WHERE k = 1", (value,))
        before = time.monotonic()
        ((got, port),) = s.rows(f"SELECT v, @@port FROM {TABLE} WHERE k = 1")
        run.latencies.append(time.monotonic() - before)
        run.ports.append(int(port))
        if writes and got != value:
            raise AssertionError(f"read-your-writes violated: wrote {value}, read {got}")
    run.seconds += time.monotonic() - started
    return run


def replica_names(topo: MariaDBTopology) -> list[str]:
    return [f"127.0.0.1:{r.port}" for r in topo.replicas]


def black_hole(form: str, topo: MariaDBTopology, seconds: float) -> dict[str, Any]:
    with session(form, topo, replica_names(topo)) as s:
        without = loop(s, seconds)
    with BlackHole() as hole, session(form, topo, [hole.name, *replica_names(topo)]) as s:
        fault = loop(s, seconds)
        accepted = hole.accepted
    return {"without": without.figures(), "with": fault.figures(), "accepted": accepted}


def frozen(
    form: str, topo: MariaDBTopology, seconds: float, freeze: float, *, writes: bool
) -> dict[str, Any]:
    total = freeze + 2 * seconds
    with session(form, topo, replica_names(topo)) as s:
        without = loop(s, total, writes=writes)
    with session(form, topo, replica_names(topo)) as s:
        loop(s, 0.5, writes=writes)  # both replicas in use
        timer = threading.Timer(seconds, topo.freeze, args=(0,))
        thaw = threading.Timer(seconds + freeze, topo.thaw, args=(0,))
        timer.start()
        thaw.start()
        try:
            fault = loop(s, total, writes=writes)
        finally:
            timer.cancel()
            thaw.cancel()
            timer.join()
            thaw.join()
            topo.thaw(0)
    return {"without": without.figures(), "with": fault.figures(), "freeze_seconds": freeze}


def stuck(form: str, topo: MariaDBTopology, seconds: float) -> dict[str, Any]:
    only = replica_names(topo)[:1]
    with session(form, topo, only) as s:
        loop(s, 1.0)
        without = loop(s, seconds)
    topo.delay(0, DELAY_SECONDS)
    try:
        with session(form, topo, only) as s:
            loop(s, 2.0)  # the monitor learns the lag
            fault = loop(s, seconds)
    finally:
        topo.delay(0, 0)
        topo.wait_for_all()
    return {"without": without.figures(), "with": fault.figures(), "delay": DELAY_SECONDS}


def restart(form: str, topo: MariaDBTopology) -> dict[str, Any]:
    names = replica_names(topo)
    victim = topo.replicas[0].port
    with session(form, topo, names) as s:
        loop(s, 1.0)
        topo.kill(0)
        outage = loop(s, 3.0)
        topo.restart(0)  # returns once it replicates again
        topo.wait_for_catchup(0)  # and has every transaction the primary has
        back = time.monotonic()
        after = Run()
        while victim not in after.ports:
            if time.monotonic() - back > 60:
                raise AssertionError("the restarted replica served no read within 60 s")
            loop(s, 0.02, run=after)
        served = time.monotonic() - back
    return {
        "seconds_to_serve": served,
        "monitor_interval": MONITOR_INTERVAL,
        "outage": outage.figures(),
    }


def ms(value: float) -> str:
    return f"{value:,.1f} ms" if value < 100 else f"{value:,.0f} ms"


def report(form: str, figures: dict[str, Any]) -> None:
    print(f"\n== {form}")
    width = 52
    print(f"{'':{width}} {'without the fault':>20} {'with the fault':>20}")
    for key, label in (
        ("black_hole", "black-hole replica"),
        ("frozen", "frozen replica"),
        ("frozen_reads", "frozen replica, reads only"),
    ):
        part = figures[key]
        for stat in ("worst_ms", "p99_ms"):
            name = f"{label}: read {stat.split('_')[0]}"
            print(f"{name:{width}} {ms(part['without'][stat]):>20} {ms(part['with'][stat]):>20}")
    worst = max(figures[k]["with"]["worst_ms"] for k in ("black_hole", "frozen", "frozen_reads"))
    name = "  bound: wait + replica_read + connect timeouts"
    print(f"{name:{width}} {'':>20} {ms(BOUND * 1000):>20}")
    name = "  worst read within the bound"
    print(f"{name:{width}} {'':>20} {worst <= BOUND * 1000!s:>20}")
    stuck_part = figures["stuck"]
    name = f"only replica {DELAY_SECONDS} s behind: reads/s"
    print(
        f"{name:{width}} {stuck_part['without']['reads_per_s']:>20,.0f} "
        f"{stuck_part['with']['reads_per_s']:>20,.0f}"
    )
    name = f"  reads that took >= {0.9 * WAIT_TIMEOUT:g} s"
    print(
        f"{name:{width}} {stuck_part['without']['slow_reads']:>20,.0f} "
        f"{stuck_part['with']['slow_reads']:>20,.0f}"
    )
    again = figures["restart"]
    name = "restarted replica: seconds to serve a read again"
    print(f"{name:{width}} {'':>20} {again['seconds_to_serve']:>19.2f}s")
    print(f"{'  monitor interval':{width}} {'':>20} {again['monitor_interval']:>19.2f}s")


def run_form(form: str, topo: MariaDBTopology, seconds: float, freeze: float) -> dict[str, Any]:
    print(f"... {form}: black hole", flush=True)
    figures: dict[str, Any] = {"black_hole": black_hole(form, topo, seconds)}
    print(f"... {form}: frozen replica", flush=True)
    figures["frozen"] = frozen(form, topo, seconds, freeze, writes=True)
    print(f"... {form}: frozen replica, reads only", flush=True)
    figures["frozen_reads"] = frozen(form, topo, seconds, freeze, writes=False)
    print(f"... {form}: replica behind wait_timeout", flush=True)
    figures["stuck"] = stuck(form, topo, seconds)
    print(f"... {form}: restarted replica", flush=True)
    figures["restart"] = restart(form, topo)
    report(form, figures)
    return figures


def prepare(topo: MariaDBTopology) -> None:
    topo.create_database("bench")
    with contextlib.closing(topo.connect(database="bench")) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {TABLE} (k INT PRIMARY KEY, v BIGINT NOT NULL)")
        cur.execute(f"INSERT INTO {TABLE} VALUES (1, 0)")
    topo.wait_for_all()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--form", choices=("wrapper", "proxy", "all"), default="all")
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each run")
    parser.add_argument("--freeze", type=float, default=8.0, help="seconds a replica is frozen")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    forms = ("wrapper", "proxy") if args.form == "all" else (args.form,)
    results: dict[str, Any] = {}
    with start_topology(replicas=2) as topo:
        print(topo.describe())
        prepare(topo)
        for form in forms:
            results[form] = run_form(form, topo, args.seconds, args.freeze)
            topo.reset_lag()
    if args.json:
        payload = {
            "settings": {
                "wait_timeout": WAIT_TIMEOUT,
                "connect_timeout": CONNECT_TIMEOUT,
                "replica_read_timeout": REPLICA_READ_TIMEOUT,
                "monitor_interval": MONITOR_INTERVAL,
                "seconds": args.seconds,
                "freeze": args.freeze,
            },
            "bound_ms": BOUND * 1000,
            "forms": results,
        }
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(payload, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
