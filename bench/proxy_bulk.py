"""MariaDB Connector/Python's ``executemany`` through the proxy against direct to the primary.

    python bench/proxy_bulk.py [--rows 2000] [--rounds 5] [--json PATH] [--proxy-root DIR]

The connector sends ``executemany`` as one COM_STMT_BULK_EXECUTE when the server offers
MariaDB's bulk capability, and row by row otherwise.  The proxy passes the capability through
when its primary has it, so both sides should take about the same time.  Each round inserts
``--rows`` rows into an emptied table, directly and through the proxy, side by side; the medians
and their ratio are reported, with whether each side saw the bulk capability.
``--proxy-root`` runs the proxy from another source tree (for a before/after comparison).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _proxy_process import free_port, proxy_process  # noqa: E402

USER, PASSWORD = "bulk", "bulk-secret"
BULK = 1 << 2  # MARIADB_CLIENT_STMT_BULK_OPERATIONS >> 32


def timed_executemany(mariadb: Any, port: int, rows: list[tuple[int, str]]) -> tuple[float, bool]:
    conn = mariadb.connect(
        host="127.0.0.1", port=port, user=USER, password=PASSWORD, database="bulk", autocommit=True
    )
    try:
        bulk = bool(conn.extended_server_capabilities & BULK)
        cur = conn.cursor()
        cur.execute("DELETE FROM t")
        started = time.perf_counter()
        cur.executemany("INSERT INTO t VALUES (?, ?)", rows)
        seconds = time.perf_counter() - started
        cur.execute("SELECT COUNT(*) FROM t")
        (count,) = cur.fetchone()
        if count != len(rows):
            raise RuntimeError(f"{count} rows inserted, not {len(rows)}")
        return seconds, bulk
    finally:
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--proxy-root", type=Path, default=ROOT)
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    import mariadb

    from consistent.testing.mariadb import start_topology

    topology = start_topology(replicas=1)
    try:
        primary = topology.primary
        primary.query(f"CREATE USER `{USER}`@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'")
        primary.query(f"GRANT ALL ON *.* TO `{USER}`@'127.0.0.1'")
        primary.query("CREATE DATABASE bulk")
        primary.query("CREATE TABLE bulk.t (id INT PRIMARY KEY, v VARCHAR(40))")
        topology.wait_for_all(60)
        port = free_port()
        config = Path(tempfile.mkdtemp()) / "proxy.toml"
        config.write_text(
            f'listen = "127.0.0.1:{port}"\n[backends]\nprimary = "127.0.0.1:{primary.port}"\n'
            f'replicas = ["127.0.0.1:{topology.replicas[0].port}"]\n'
            f'user = "{USER}"\npassword = "{PASSWORD}"\n[users.{USER}]\npassword = "{PASSWORD}"\n'
        )
        with proxy_process(config, port, args.proxy_root):
            rows = [(i, f"row {i}") for i in range(args.rows)]
            direct: list[float] = []
            proxied: list[float] = []
            bulk = {"direct": False, "proxy": False}
            for _ in range(args.rounds):
                seconds, bulk["direct"] = timed_executemany(mariadb, primary.port, rows)
                direct.append(seconds)
                seconds, bulk["proxy"] = timed_executemany(mariadb, port, rows)
                proxied.append(seconds)
        figures = {
            "rows": args.rows,
            "rounds": args.rounds,
            "connector": mariadb.__version__,
            "direct_seconds": round(statistics.median(direct), 4),
            "proxy_seconds": round(statistics.median(proxied), 4),
            "bulk_direct": bulk["direct"],
            "bulk_proxy": bulk["proxy"],
        }
        figures["proxy_over_direct"] = round(
            figures["proxy_seconds"] / figures["direct_seconds"], 2
        )
        print(
            f"executemany of {args.rows} rows (median of {args.rounds}): direct "
            f"{figures['direct_seconds']} s (bulk {bulk['direct']}), through the proxy "
            f"{figures['proxy_seconds']} s (bulk {bulk['proxy']}): "
            f"{figures['proxy_over_direct']}x"
        )
        if args.json is not None:
            args.json.write_text(json.dumps(figures, indent=2) + "\n")
        return 0
    finally:
        topology.close()


if __name__ == "__main__":
    raise SystemExit(main())
