"""Replica discovery (``[backends] discover_replicas``, off by default): replicas the primary
lists (``SHOW SLAVE HOSTS``) join when their address is on the allow-list, on real MariaDB."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import pytest

from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.switchover import wait_for
from proxy.testing import ProxyThread

from .conftest import connect

pytestmark = pytest.mark.mariadb


def roles(proxy: ProxyThread) -> dict[str, Any]:
    status: dict[str, Any] = proxy.run(proxy.server.status)
    return dict(status["roles"])


def ports_read_from(proxy: ProxyThread, reads: int = 60) -> set[int]:
    """The servers a fresh session's eventual reads went to."""
    with contextlib.closing(connect(proxy)) as conn, conn.cursor() as cur:
        cur.execute("SET @@consistent_level = 'eventual'")
        seen = set()
        for _ in range(reads):
            cur.execute("SELECT @@port")
            seen.add(int(cur.fetchall()[0][0]))
        return seen


def one_replica(topology: MariaDBTopology, **backends: Any) -> dict[str, Any]:
    return {"replicas": [f"127.0.0.1:{topology.replicas[0].port}"], **backends}


def test_a_listed_replica_on_the_allow_list_joins_and_serves_reads(
    mariadb_topology: MariaDBTopology, make_proxy: Callable[..., ProxyThread]
) -> None:
    unnamed = mariadb_topology.replicas[1]
    proxy = make_proxy(backends=one_replica(mariadb_topology, discover_replicas=["127.0.0.0/8"]))
    wait_for(lambda: roles(proxy)["discovered_replicas"] == [f"127.0.0.1:{unnamed.port}"])
    deadline = time.monotonic() + 10
    while unnamed.port not in ports_read_from(proxy):
        assert time.monotonic() < deadline, "the discovered replica never served a read"


@pytest.mark.parametrize("allowed", [None, ["10.0.0.0/8", "db9.example"]], ids=["off", "elsewhere"])
def test_a_listed_replica_off_the_allow_list_stays_out(
    mariadb_topology: MariaDBTopology,
    make_proxy: Callable[..., ProxyThread],
    allowed: list[str] | None,
) -> None:
    extra = {} if allowed is None else {"discover_replicas": allowed}
    proxy = make_proxy(backends=one_replica(mariadb_topology, **extra))
    wait_for(lambda: roles(proxy)["writable"] is not None)
    time.sleep(0.5)  # ten monitor polls
    assert roles(proxy)["discovered_replicas"] == []
    assert mariadb_topology.replicas[1].port not in ports_read_from(proxy)
