"""Connect, one transaction, disconnect: directly, through the pooled proxy, and with
multiplexing off.

    python bench/proxy_connect_per_txn.py [--seconds 8] [--rounds 2] [--threads 4] [--json PATH]

A MariaDB primary alone and two proxies in their own processes in front of it, one with
multiplexing on (``[pool] max_connections = 16``), one with it off.  Two workloads, each run
against the three targets in turn, ``--rounds`` times (the targets interleaved, so that a change
of machine load falls on all of them):

* ``pymysql``: ``--threads`` threads, each a loop that connects with PyMySQL, runs ``BEGIN``,
  ``UPDATE`` of a random row, ``SELECT`` of it, ``COMMIT``, and closes (the commit's log flush
  weighs on every target alike);
* ``pymysql_read``: the same with a second ``SELECT`` instead of the ``UPDATE``, where the cost
  of connecting shows;
* ``sysbench``: ``oltp_read_write --reconnect=1`` (sysbench reconnects after every transaction),
  when the installed ``sysbench`` has ``--reconnect`` (1.1 and later; 1.0.x has not, and the
  workload is then skipped, saying so).

Transactions per second per target (the median of the rounds) and each proxy's ratio to direct
are printed side by side.  Connecting directly pays a server login per transaction; through the
pooled proxy only a proxy login, the backend connection being borrowed.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pymysql  # noqa: E402
from _proxy_process import free_port, proxy_process  # noqa: E402

from consistent.testing.mariadb import start_topology  # noqa: E402

USER, PASSWORD = "cpt", "cpt-secret"
ROWS = 1000
TARGETS = ("direct", "multiplexing", "no_multiplexing")
SYSBENCH_TABLES, SYSBENCH_SIZE = 2, 1000


def pymysql_tps(
    port: int, seconds: float, threads: int, *, write: bool = True
) -> tuple[float, int]:
    """(transactions per second, errors) of ``threads`` connect-per-transaction loops; the
    transaction updates a row and reads it (``write``), or reads two rows."""
    done = [0] * threads
    errors = [0] * threads
    deadline = time.monotonic() + seconds

    def loop(t: int) -> None:
        rng = random.Random(t)
        while time.monotonic() < deadline:
            try:
                conn = pymysql.connect(
                    host="127.0.0.1",
                    port=port,
                    user=USER,
                    password=PASSWORD,
                    database="cpt",
                    autocommit=True,
                    # Plain TCP everywhere; else PyMySQL builds a TLS context per connection
                    # (about 16 ms of client CPU loading CA certificates), whatever the target.
                    ssl_disabled=True,
                )
                try:
                    k = rng.randrange(ROWS)
                    with conn.cursor() as cur:
                        cur.execute("BEGIN")
                        if write:
                            cur.execute("UPDATE kv SET v = v + 1 WHERE k = %s", (k,))
                        else:
                            cur.execute("SELECT v FROM kv WHERE k = %s", ((k + 1) % ROWS,))
                            cur.fetchall()
                        cur.execute("SELECT v FROM kv WHERE k = %s", (k,))
                        cur.fetchall()
                        cur.execute("COMMIT")
                finally:
                    conn.close()
                done[t] += 1
            except pymysql.err.Error:
                errors[t] += 1

    started = time.monotonic()
    workers = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(done) / (time.monotonic() - started), sum(errors)


def _sysbench(port: int, command: str, seconds: float, threads: int) -> str:
    args = [
        "sysbench",
        "oltp_read_write",
        "--db-driver=mysql",
        "--mysql-host=127.0.0.1",
        f"--mysql-port={port}",
        f"--mysql-user={USER}",
        f"--mysql-password={PASSWORD}",
        "--mysql-db=sbt",
        f"--tables={SYSBENCH_TABLES}",
        f"--table-size={SYSBENCH_SIZE}",
        f"--threads={threads}",
        f"--time={int(seconds)}",
        "--reconnect=1",
        "--mysql-ignore-errors=all",
        command,
    ]
    return subprocess.run(args, capture_output=True, text=True, check=True, timeout=300).stdout


def sysbench_tps(port: int, seconds: float, threads: int) -> tuple[float, int]:
    """(transactions per second, errors) of sysbench ``oltp_read_write --reconnect=1``."""
    out = _sysbench(port, "run", seconds, threads)
    tps = re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", out)
    errs = re.search(r"ignored errors:\s+(\d+)", out)
    if tps is None:
        raise RuntimeError(f"sysbench printed no transaction rate:\n{out}")
    return float(tps.group(1)), int(errs.group(1)) if errs else 0


def sysbench_reconnects() -> bool:
    """Whether an installed sysbench has ``--reconnect``."""
    if shutil.which("sysbench") is None:
        return False
    done = subprocess.run(["sysbench", "--help"], capture_output=True, text=True, check=False)
    return "--reconnect" in done.stdout + done.stderr


def proxy_toml(primary: int, port: int, multiplexing: bool) -> str:
    return (
        f'listen = "127.0.0.1:{port}"\n'
        f"[pool]\nmultiplexing = {'true' if multiplexing else 'false'}\n"
        "max_connections = 16\n"
        f'[backends]\nprimary = "127.0.0.1:{primary}"\n'
        f'user = "{USER}"\npassword = "{PASSWORD}"\n'
        f'[users.{USER}]\npassword = "{PASSWORD}"\n'
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    workloads: dict[str, Any] = {
        "pymysql": pymysql_tps,
        "pymysql_read": lambda port, seconds, threads: pymysql_tps(
            port, seconds, threads, write=False
        ),
    }
    if sysbench_reconnects():
        workloads["sysbench"] = sysbench_tps
    else:
        print("sysbench with --reconnect is not installed (1.1 or later): PyMySQL loop only")
    load_before = float(Path("/proc/loadavg").read_text().split()[0])
    results: dict[str, dict[str, list[float]]] = {w: {t: [] for t in TARGETS} for w in workloads}
    errors: dict[str, dict[str, int]] = {w: dict.fromkeys(TARGETS, 0) for w in workloads}
    work = Path(tempfile.mkdtemp())
    with start_topology(replicas=0) as topology:
        primary = topology.primary
        primary.query(f"CREATE USER `{USER}`@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'")
        primary.query(f"GRANT ALL ON *.* TO `{USER}`@'127.0.0.1'")
        primary.query("CREATE DATABASE cpt")
        primary.query("CREATE DATABASE sbt")
        primary.query("CREATE TABLE cpt.kv (k INT PRIMARY KEY, v INT NOT NULL)")
        primary.query("INSERT INTO cpt.kv VALUES " + ",".join(f"({i}, 0)" for i in range(ROWS)))
        if "sysbench" in workloads:
            _sysbench(primary.port, "prepare", 0, 1)
        ports = {
            "direct": primary.port,
            "multiplexing": free_port(),
            "no_multiplexing": free_port(),
        }
        on, off = work / "on.toml", work / "off.toml"
        on.write_text(proxy_toml(primary.port, ports["multiplexing"], True))
        off.write_text(proxy_toml(primary.port, ports["no_multiplexing"], False))
        with (
            proxy_process(on, ports["multiplexing"], ROOT),
            proxy_process(off, ports["no_multiplexing"], ROOT),
        ):
            for name, measure in workloads.items():
                for r in range(args.rounds):
                    for target in TARGETS:
                        tps, errs = measure(ports[target], args.seconds, args.threads)
                        results[name][target].append(tps)
                        errors[name][target] += errs
                        print(f"{name} round {r + 1} {target}: {tps:,.0f} tps, {errs} errors")
    load_after = float(Path("/proc/loadavg").read_text().split()[0])
    figures: dict[str, Any] = {
        "threads": args.threads,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "load": [load_before, load_after],
    }
    print(f"\nconnect per transaction, {args.threads} threads, load {load_before} -> {load_after}")
    print(
        f"{'workload':<12} {'direct':>10} {'mux on':>10} {'mux off':>10} {'on/direct':>10} "
        f"{'off/direct':>10}"
    )
    for name in workloads:
        median = {t: statistics.median(results[name][t]) for t in TARGETS}
        figures[name] = {
            "tps": {t: round(v, 1) for t, v in median.items()},
            "rounds": results[name],
            "errors": errors[name],
            "multiplexing_over_direct": round(median["multiplexing"] / median["direct"], 3),
            "no_multiplexing_over_direct": round(median["no_multiplexing"] / median["direct"], 3),
        }
        print(
            f"{name:<12} {median['direct']:>10,.0f} {median['multiplexing']:>10,.0f} "
            f"{median['no_multiplexing']:>10,.0f} "
            f"{figures[name]['multiplexing_over_direct']:>10.2f} "
            f"{figures[name]['no_multiplexing_over_direct']:>10.2f}"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
