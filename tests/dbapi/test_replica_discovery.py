"""Replica discovery through the wrapper (``discover_replicas``, off by default): replicas the
primary lists join the connections' replicas when the allow-list admits them, on real
MariaDB."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

import consistent.dbapi as db
from consistent.policy import ReplicaKnowledge
from consistent.testing.mariadb import MariaDBTopology

pytestmark = pytest.mark.mariadb


@pytest.fixture
def connect(mariadb_topology: MariaDBTopology) -> Iterator[Any]:
    opened: list[db.Connection] = []
    knowledge = ReplicaKnowledge()

    def make(**options: Any) -> db.Connection:
        conn = db.connect(
            primary=f"127.0.0.1:{mariadb_topology.primary.port}",
            replicas=[f"127.0.0.1:{mariadb_topology.replicas[0].port}"],
            user=mariadb_topology.app_user,
            password=mariadb_topology.app_password,
            monitor_interval=0.05,
            level="eventual",
            knowledge=knowledge,
            **options,
        )
        opened.append(conn)
        return conn

    yield make
    for conn in opened:
        with contextlib.suppress(db.Error):
            conn.close()


def ports_read_from(conn: db.Connection, reads: int = 60) -> set[int]:
    seen = set()
    with conn.cursor() as cur:
        for _ in range(reads):
            cur.execute("SELECT @@port")
            seen.add(int(cur.fetchall()[0][0]))
    return seen


def test_a_listed_replica_on_the_allow_list_joins_and_serves_reads(
    mariadb_topology: MariaDBTopology, connect: Any
) -> None:
    unnamed = mariadb_topology.replicas[1]
    conn = connect(discover_replicas="127.0.0.0/8")
    deadline = time.monotonic() + 10
    while unnamed.port not in ports_read_from(conn):
        assert time.monotonic() < deadline, "the discovered replica never served a read"
    assert f"127.0.0.1:{unnamed.port}" in conn.replicas


@pytest.mark.parametrize("allowed", [None, "10.0.0.0/8,db9.example"], ids=["off", "elsewhere"])
def test_a_listed_replica_off_the_allow_list_stays_out(
    mariadb_topology: MariaDBTopology, connect: Any, allowed: str | None
) -> None:
    conn = connect(**({} if allowed is None else {"discover_replicas": allowed}))
    time.sleep(0.5)  # ten monitor polls
    assert mariadb_topology.replicas[1].port not in ports_read_from(conn)
    assert conn.replicas == (f"127.0.0.1:{mariadb_topology.replicas[0].port}",)
