"""2,000 concurrent client connections through the proxy, for minutes.

    python bench/proxy_load.py [--clients 2000] [--seconds 180] [--json PATH]

1. Idle: every client logs in and does nothing; the proxy's RSS is reported (target: at most
   300 MB) and no backend connection is opened (they are lazy).
2. Load: every client loops ``UPDATE`` its own row, ``SELECT`` it back (read-your-writes is
   checked on the data: the value read must be the one written), sleeps 0.5-1.5 s.  Errors and
   violations are counted; the proxy's RSS is sampled.
3. Close: every client quits; the proxy must end with no session and no backend connection but
   its monitors' (checked in ``/status`` and in MariaDB's ``Threads_connected``).

The clients are a small asyncio MySQL client written here on the codec, in one process.
``--json PATH`` also writes the figures as one JSON object (RSS at start and at N idle
connections, RSS per connection, peak RSS, queries, errors, violations, leaked backend
connections, pass/fail).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import uvloop  # noqa: E402
from _proxy_process import admin_status, free_port, rss_mb  # noqa: E402

from consistent.protocol import (  # noqa: E402
    Capability,
    HandshakeResponse41,
    build_handshake_response41,
    parse_err,
    parse_handshake_v10,
    parse_text_row,
    scramble_native_password,
)
from consistent.testing.mariadb import MariaDBTopology, start_topology  # noqa: E402

USER, PASSWORD, TOKEN = "load", "load-secret", "load-admin-token"
CAPS = (
    Capability.LONG_PASSWORD
    | Capability.PROTOCOL_41
    | Capability.TRANSACTIONS
    | Capability.SECURE_CONNECTION
    | Capability.PLUGIN_AUTH
    | Capability.CONNECT_WITH_DB
)


class QueryError(Exception):
    pass


class Client:
    """Login, text queries, quit: enough for the load."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(
        cls, port: int, database: str, user: str = USER, password: str = PASSWORD
    ) -> Client:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        client = cls(reader, writer)
        seq, hello = await client.read()
        greeting = parse_handshake_v10(hello)
        response = HandshakeResponse41(
            capabilities=CAPS,
            username=user,
            auth_response=scramble_native_password(password.encode(), greeting.auth_plugin_data),
            max_packet_size=1 << 24,
            charset=45,
            database=database,
            auth_plugin_name="mysql_native_password",
        )
        client.send(build_handshake_response41(response), seq + 1)
        _, reply = await client.read()
        if reply[:1] != b"\x00":
            raise QueryError(f"login failed: {reply!r}")
        return client

    async def read(self) -> tuple[int, bytes]:
        head = await self.reader.readexactly(4)
        length = int.from_bytes(head[:3], "little")
        return head[3], await self.reader.readexactly(length)

    def send(self, payload: bytes, seq: int) -> None:
        self.writer.write(struct.pack("<I", len(payload) | seq << 24) + payload)

    async def query(self, sql: str) -> list[tuple[bytes | None, ...]]:
        self.send(b"\x03" + sql.encode(), 0)
        _, first = await self.read()
        if first[:1] == b"\xff":
            raise QueryError(parse_err(first, CAPS).message)
        if first[:1] == b"\x00":
            return []
        count = first[0]
        for _ in range(count + 1):  # definitions and their EOF
            await self.read()
        rows: list[tuple[bytes | None, ...]] = []
        while True:
            _, packet = await self.read()
            if packet[:1] == b"\xfe" and len(packet) < 9:
                return rows
            if packet[:1] == b"\xff":
                raise QueryError(parse_err(packet, CAPS).message)
            rows.append(parse_text_row(packet, count))

    async def quit(self) -> None:
        self.send(b"\x01", 0)
        self.writer.close()
        with contextlib.suppress(TimeoutError, OSError):
            await asyncio.wait_for(self.writer.wait_closed(), 5)


def threads_connected(topology: MariaDBTopology) -> int:
    total = 0
    for server in topology.servers:
        row = server.query("SHOW GLOBAL STATUS LIKE 'Threads_connected'")[0]
        total += int(row["Value"])
    return total


async def load(args: argparse.Namespace, port: int, pid: int, admin: int) -> dict[str, float]:
    sem = asyncio.Semaphore(100)

    async def login() -> Client:
        async with sem:
            return await Client.connect(port, "loadtest")

    started = time.monotonic()
    clients = await asyncio.gather(*(login() for _ in range(args.clients)))
    login_seconds = time.monotonic() - started
    print(f"{len(clients)} clients logged in in {login_seconds:.1f} s")
    await asyncio.sleep(2)
    idle_rss = rss_mb(pid)
    idle = admin_status(admin, TOKEN)
    backends = {b["name"]: b["open_connections"] for b in idle["backends"]}
    print(
        f"idle: RSS {idle_rss:.0f} MB, sessions {len(idle['sessions'])}, "
        f"backend connections {backends}"
    )

    stats: dict[str, float] = {"queries": 0, "errors": 0, "violations": 0, "peak_rss": idle_rss}
    deadline = time.monotonic() + args.seconds

    async def work(i: int, client: Client) -> None:
        value = 0
        await asyncio.sleep(random.uniform(0, 1.5))
        while time.monotonic() < deadline:
            try:
                value += 1
                await client.query(f"UPDATE kv SET v = {value} WHERE k = {i}")
                rows = await client.query(f"SELECT v FROM kv WHERE k = {i}")
                stats["queries"] += 2
                if rows != [(str(value).encode(),)]:
                    stats["violations"] += 1
            except (QueryError, OSError, asyncio.IncompleteReadError) as e:
                stats["errors"] += 1
                if stats["errors"] <= 5:
                    print(f"  client {i}: {e}")
                return
            await asyncio.sleep(random.uniform(0.5, 1.5))

    async def sample() -> None:
        while time.monotonic() < deadline:
            await asyncio.sleep(5)
            stats["peak_rss"] = max(stats["peak_rss"], rss_mb(pid))

    started = time.monotonic()
    await asyncio.gather(sample(), *(work(i, c) for i, c in enumerate(clients)))
    elapsed = time.monotonic() - started
    busy = admin_status(admin, TOKEN)
    backends = {b["name"]: b["open_connections"] for b in busy["backends"]}
    rate = stats["queries"] / elapsed
    print(
        f"load: {stats['queries']} queries in {elapsed:.0f} s ({rate:.0f}/s), "
        f"errors {stats['errors']}, read-your-writes violations {stats['violations']}, "
        f"peak RSS {stats['peak_rss']:.0f} MB, backend connections {backends}"
    )
    await asyncio.gather(*(c.quit() for c in clients))
    stats["idle_rss"] = idle_rss
    stats["elapsed"] = elapsed
    stats["login_seconds"] = login_seconds
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--seconds", type=int, default=180)
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    topology = start_topology(
        replicas=2, extra_server_args=("--max-connections=5000", "--open-files-limit=16000")
    )
    try:
        # Created on the primary, the account replicates to the replicas.
        topology.primary.query(f"CREATE USER `{USER}`@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'")
        topology.primary.query(f"GRANT ALL ON *.* TO `{USER}`@'127.0.0.1'")
        topology.primary.query("CREATE DATABASE loadtest")
        topology.primary.query("CREATE TABLE loadtest.kv (k INT PRIMARY KEY, v INT NOT NULL)")
        values = ",".join(f"({i}, 0)" for i in range(args.clients))
        topology.primary.query(f"INSERT INTO loadtest.kv VALUES {values}")
        topology.wait_for_all(60)
        baseline = threads_connected(topology)
        port, admin = free_port(), free_port()
        config = Path(tempfile.mkdtemp()) / "proxy.toml"
        replicas = ", ".join(f'"127.0.0.1:{r.port}"' for r in topology.replicas)
        config.write_text(
            f'listen = "127.0.0.1:{port}"\nmax_connections = {args.clients + 100}\n'
            f'[backends]\nprimary = "127.0.0.1:{topology.primary.port}"\nreplicas = [{replicas}]\n'
            f'user = "{USER}"\npassword = "{PASSWORD}"\n'
            f'[users.{USER}]\npassword = "{PASSWORD}"\n'
            f'[admin]\nlisten = "127.0.0.1:{admin}"\ntoken = "{TOKEN}"\n'
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "--config", str(config)],
            cwd=ROOT,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            start_rss = rss_mb(proc.pid)
            print(
                f"proxy pid {proc.pid}, RSS at start {start_rss:.0f} MB; "
                f"MariaDB threads before: {baseline}"
            )
            stats = uvloop.run(load(args, port, proc.pid, admin))
            time.sleep(3)
            after = admin_status(admin, TOKEN)
            backends = {b["name"]: b["open_connections"] for b in after["backends"]}
            left = threads_connected(topology)
            print(
                f"after close: sessions {len(after['sessions'])}, "
                f"backend connections {backends} (monitors only: 1 each), "
                f"MariaDB threads {left} (before: {baseline} + 3 monitors)"
            )
            leaked = sum(backends.values()) - len(backends)
            ok = (
                stats["errors"] == 0
                and stats["violations"] == 0
                and leaked == 0
                and stats["idle_rss"] <= 300
            )
            idle = stats["idle_rss"]
            print(f"\nRSS at {args.clients} idle connections: {idle:.0f} MB (target <= 300)")
            print(f"result: {'PASS' if ok else 'FAIL'}")
            if args.json is not None:
                figures = {
                    "clients": args.clients,
                    "seconds": args.seconds,
                    "login_seconds": round(stats["login_seconds"], 2),
                    "rss_start_mb": round(start_rss, 1),
                    "rss_idle_mb": round(idle, 1),
                    "rss_idle_target_mb": 300,
                    "rss_per_connection_kb": round((idle - start_rss) * 1024 / args.clients, 1),
                    "rss_peak_mb": round(stats["peak_rss"], 1),
                    "queries": int(stats["queries"]),
                    "queries_per_second": round(stats["queries"] / stats["elapsed"], 1),
                    "errors": int(stats["errors"]),
                    "violations": int(stats["violations"]),
                    "leaked_backend_connections": leaked,
                    "sessions_after_close": len(after["sessions"]),
                    "mariadb_threads_before": baseline,
                    "mariadb_threads_after": left,
                    "pass": ok,
                }
                args.json.write_text(json.dumps(figures, indent=2) + "\n")
            return 0 if ok else 1
        finally:
            proc.terminate()
            proc.wait(30)
    finally:
        topology.close()


if __name__ == "__main__":
    raise SystemExit(main())
