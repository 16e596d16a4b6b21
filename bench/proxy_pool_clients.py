"""5,000 clients through the pooled proxy, against a MariaDB primary that accepts 151.

    python bench/proxy_pool_clients.py [--clients 5000] [--pool 100] [--json PATH]

A MariaDB primary alone, with ``max_connections=151`` (MariaDB's default), and the proxy in its
own process with ``[pool] max_connections = --pool``.  Every client logs in (at most 200 logins
in flight), then all of them at once run ``--rounds`` rounds of one transaction each
(``BEGIN``; ``UPDATE`` its own row; ``SELECT`` it back, checking the value; ``COMMIT``), so that
thousands of sessions queue for the pool's connections.  Reported: clients logged in, errors,
wrong reads, the most backend connections seen (the pool's size in ``/status``, sampled, and
MariaDB's ``Max_used_connections``) against the pool's maximum, and the proxy's RSS when every
client is idle and at its peak.

The clients are the small asyncio client of ``bench/proxy_load.py``, in one process.  Each
client is a socket in this process and in the proxy: ``RLIMIT_NOFILE`` is raised to its hard
limit here, and the proxy inherits it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import uvloop  # noqa: E402
from _proxy_process import admin_status, free_port, rss_mb  # noqa: E402
from proxy_load import Client, QueryError  # noqa: E402

from consistent.errors import RemoteProtocolError  # noqa: E402
from consistent.testing.mariadb import start_topology  # noqa: E402

USER, PASSWORD, TOKEN = "poolc", "poolc-secret", "poolc-admin-token"
SERVER_LIMIT = 151


def raise_nofile(needed: int) -> int:
    """Raise this process's soft ``RLIMIT_NOFILE`` towards ``needed`` (at most the hard limit);
    the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


async def drive(args: argparse.Namespace, port: int, pid: int, admin: int) -> dict[str, Any]:
    sem = asyncio.Semaphore(200)
    login_errors: list[str] = []

    async def login() -> Client | None:
        async with sem:
            try:
                return await Client.connect(port, "poolc", USER, PASSWORD)
            except (QueryError, RemoteProtocolError, OSError, asyncio.IncompleteReadError) as e:
                login_errors.append(repr(e))
                return None

    started = time.monotonic()
    logged = await asyncio.gather(*(login() for _ in range(args.clients)))
    clients = [c for c in logged if c is not None]
    login_seconds = time.monotonic() - started
    await asyncio.sleep(1)
    idle_rss = rss_mb(pid)
    print(
        f"{len(clients)}/{args.clients} logged in in {login_seconds:.1f} s "
        f"({len(login_errors)} errors); idle RSS {idle_rss:.0f} MB",
        flush=True,
    )

    stats: dict[str, Any] = {"transactions": 0, "errors": 0, "wrong_reads": 0}
    peak = {"rss": idle_rss, "pool_size": 0, "waiting": 0}
    errors: list[str] = []
    running = True

    async def work(i: int, client: Client) -> None:
        for n in range(1, args.rounds + 1):
            try:
                await client.query("BEGIN")
                await client.query(f"UPDATE kv SET v = {n} WHERE k = {i}")
                rows = await client.query(f"SELECT v FROM kv WHERE k = {i}")
                await client.query("COMMIT")
            except (QueryError, OSError, asyncio.IncompleteReadError) as e:
                stats["errors"] += 1
                errors.append(repr(e))
                return
            stats["transactions"] += 1
            if rows != [(str(n).encode(),)]:
                stats["wrong_reads"] += 1

    async def sample() -> None:
        loop = asyncio.get_running_loop()
        while running:
            status = await loop.run_in_executor(None, admin_status, admin, TOKEN)
            for pool in status["pools"]:
                peak["pool_size"] = max(peak["pool_size"], pool["size"])
                peak["waiting"] = max(peak["waiting"], pool["waiting"])
            peak["rss"] = max(peak["rss"], rss_mb(pid))
            await asyncio.sleep(0.5)

    sampler = asyncio.get_running_loop().create_task(sample())
    started = time.monotonic()
    await asyncio.gather(*(work(i, c) for i, c in enumerate(clients)))
    elapsed = time.monotonic() - started
    running = False
    await sampler
    status = admin_status(admin, TOKEN)
    pool = next(p for p in status["pools"] if p["name"].startswith("primary "))
    peak["pool_size"] = max(peak["pool_size"], pool["size"])
    print(
        f"{stats['transactions']} transactions in {elapsed:.1f} s, {stats['errors']} errors "
        f"{sorted(set(errors))[:2]}, {stats['wrong_reads']} wrong reads; pool at most "
        f"{peak['pool_size']} connections (max {pool['max_connections']}), at most "
        f"{peak['waiting']} sessions waiting, {pool['exhausted']} exhausted; peak RSS "
        f"{peak['rss']:.0f} MB",
        flush=True,
    )
    await asyncio.gather(*(c.quit() for c in clients))
    return {
        "logged_in": len(clients),
        "login_errors": len(login_errors),
        "login_seconds": round(login_seconds, 2),
        "transactions": stats["transactions"],
        "transactions_per_second": round(stats["transactions"] / elapsed, 1),
        "errors": stats["errors"] + len(login_errors),
        "wrong_reads": stats["wrong_reads"],
        "pool_max_connections": pool["max_connections"],
        "pool_size_peak": peak["pool_size"],
        "pool_waiting_peak": peak["waiting"],
        "pool_exhausted": pool["exhausted"],
        "rss_idle_mb": round(idle_rss, 1),
        "rss_peak_mb": round(peak["rss"], 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=5000)
    parser.add_argument("--pool", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    nofile = raise_nofile(args.clients + 1000)
    if nofile < args.clients + 200:
        print(f"RLIMIT_NOFILE is {nofile}: too low for {args.clients} clients")
        return 1
    topology = start_topology(replicas=0, extra_server_args=(f"--max-connections={SERVER_LIMIT}",))
    try:
        topology.primary.query(f"CREATE USER `{USER}`@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'")
        topology.primary.query(f"GRANT ALL ON *.* TO `{USER}`@'127.0.0.1'")
        topology.primary.query("CREATE DATABASE poolc")
        topology.primary.query("CREATE TABLE poolc.kv (k INT PRIMARY KEY, v INT NOT NULL)")
        values = ",".join(f"({i}, 0)" for i in range(args.clients))
        topology.primary.query(f"INSERT INTO poolc.kv VALUES {values}")
        topology.primary.query("FLUSH STATUS")
        server_limit = topology.primary.query("SELECT @@max_connections AS m")[0]["m"]
        port, admin = free_port(), free_port()
        config = Path(tempfile.mkdtemp()) / "proxy.toml"
        config.write_text(
            f'listen = "127.0.0.1:{port}"\nmax_connections = {args.clients + 100}\n'
            # 200 logins in flight from one address (the default allows 64 per address).
            "max_unauthenticated_per_address = 256\n"
            f"[pool]\nmax_connections = {args.pool}\nwait_timeout = 120.0\n"
            f'[backends]\nprimary = "127.0.0.1:{topology.primary.port}"\n'
            f'user = "{USER}"\npassword = "{PASSWORD}"\n'
            f'[users.{USER}]\npassword = "{PASSWORD}"\n'
            f'[admin]\nlisten = "127.0.0.1:{admin}"\ntoken = "{TOKEN}"\n'
        )
        load_before = Path("/proc/loadavg").read_text().split()[0]
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "--config", str(config)],
            cwd=ROOT,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_for(port)
            start_rss = rss_mb(proc.pid)
            print(
                f"primary max_connections={server_limit}; proxy pool max {args.pool}; "
                f"{args.clients} clients; RLIMIT_NOFILE {nofile}; proxy RSS at start "
                f"{start_rss:.0f} MB",
                flush=True,
            )
            figures = uvloop.run(drive(args, port, proc.pid, admin))
        finally:
            proc.terminate()
            proc.wait(30)
        row = topology.primary.query("SHOW GLOBAL STATUS LIKE 'Max_used_connections'")[0]
        max_used = int(row["Value"])
    finally:
        topology.close()
    load_after = Path("/proc/loadavg").read_text().split()[0]
    ok = (
        figures["logged_in"] == args.clients
        and figures["errors"] == 0
        and figures["wrong_reads"] == 0
        and figures["pool_size_peak"] <= args.pool
    )
    print(
        f"MariaDB Max_used_connections {max_used} (of {server_limit}; the pool's, the proxy's "
        f"monitor and this bench's setup connection)\nresult: {'PASS' if ok else 'FAIL'}"
    )
    figures.update(
        {
            "clients": args.clients,
            "server_max_connections": int(server_limit),
            "server_max_used_connections": max_used,
            "rss_start_mb": round(start_rss, 1),
            "rlimit_nofile": nofile,
            "load": [float(load_before), float(load_after)],
            "pass": ok,
        }
    )
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if ok else 1


def _wait_for(port: int) -> None:
    import socket

    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


if __name__ == "__main__":
    raise SystemExit(main())
