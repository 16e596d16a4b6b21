"""Clients beyond the primary's ``max_connections``, through the proxy's shared pool.

A MariaDB topology (primary + 2 replicas) whose primary accepts only ``--server-limit``
connections; ``--clients`` clients log in through the proxy at once and each runs ten rounds of
a write, a locking read (primary) and a plain read (a replica), checking what it reads.  Prints
how many were served with multiplexing on (``[pool] max_connections = --pool``) and off (one
backend connection per session, as before multiplexing).

    python bench/proxy_pool.py --clients 200 --pool 8 --server-limit 30
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

# Run as a script, bench/ is first on sys.path, and bench/proxy.py would hide the package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import pymysql  # noqa: E402

from consistent.testing.mariadb import MariaDBTopology, start_topology  # noqa: E402
from proxy.config import parse  # noqa: E402
from proxy.testing import ProxyThread  # noqa: E402


def run(topology: MariaDBTopology, clients: int, pool: int, multiplexing: bool) -> str:
    config = parse(
        {
            "listen": "127.0.0.1:0",
            "backends": {
                "primary": f"127.0.0.1:{topology.primary.port}",
                "replicas": [f"127.0.0.1:{r.port}" for r in topology.replicas],
                "user": topology.app_user,
                "password": topology.app_password,
                "monitor_interval_ms": 200,
            },
            "users": {"app": {"password": "secret"}},
            "pool": {"multiplexing": multiplexing, "max_connections": pool, "wait_timeout": 60.0},
        }
    )
    errors: list[str] = []
    served = [0]
    with ProxyThread(config) as proxy:
        conns: list[Any] = []
        for _ in range(clients):
            try:
                conns.append(
                    pymysql.connect(
                        host="127.0.0.1",
                        port=proxy.port,
                        user="app",
                        password="secret",
                        autocommit=True,
                        read_timeout=120,
                    )
                )
            except pymysql.err.OperationalError as e:
                errors.append(str(e.args[0]))

        def work(i: int, conn: Any) -> None:
            try:
                with conn.cursor() as cur:
                    for n in range(10):
                        cur.execute("REPLACE INTO bench_pool.t VALUES (%s, %s)", (i, n))
                        cur.execute("SELECT v FROM bench_pool.t WHERE k = %s FOR UPDATE", (i,))
                        assert cur.fetchall() == ((n,),)
                        cur.execute("SELECT v FROM bench_pool.t WHERE k = %s", (i,))
                        assert cur.fetchall() == ((n,),)
                served[0] += 1
            except (pymysql.err.Error, AssertionError) as e:
                errors.append(repr(e))

        started = time.perf_counter()
        threads = [threading.Thread(target=work, args=(i, c)) for i, c in enumerate(conns)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        pools = proxy.run(proxy.server.status)["pools"]
        for conn in conns:
            conn.close()
    sizes = ", ".join(f"{p['name']}: {p['size']}" for p in pools)  # type: ignore[index]
    return (
        f"multiplexing={'on' if multiplexing else 'off'}: {len(conns)}/{clients} logged in, "
        f"{served[0]} served, {len(errors)} errors {sorted(set(errors))[:2]}, "
        f"{wall:.1f} s; pools: {sizes or 'none'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--pool", type=int, default=8)
    parser.add_argument("--server-limit", type=int, default=30)
    args = parser.parse_args()
    with start_topology(replicas=2) as topology:
        topology.primary.query(f"SET GLOBAL max_connections = {args.server_limit}")
        admin = topology.connect()
        with admin.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS bench_pool")
            cur.execute("CREATE TABLE IF NOT EXISTS bench_pool.t (k INT PRIMARY KEY, v INT)")
        admin.close()
        print(f"primary max_connections={args.server_limit}, clients={args.clients}")
        for multiplexing in (True, False):
            print(run(topology, args.clients, args.pool, multiplexing))


if __name__ == "__main__":
    main()
