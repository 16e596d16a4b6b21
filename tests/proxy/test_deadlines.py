"""The proxy's deadlines count silence, not time: a slow client that makes the proxy stop
reading a replica (flow control) does not make that replica miss its deadline.  The faults
themselves (black hole, SIGSTOP, delay, restart) are in ``tests/integration/test_deadlines.py``,
through both forms."""

from __future__ import annotations

import time
from collections.abc import Callable

import pymysql.cursors

from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.pytest_plugin import CleanDatabase
from proxy.testing import ProxyThread

from .conftest import connect

ROWS = 20_000
WIDTH = 1_000  # 20 MB: far more than the socket and transport buffers between the two


def test_a_slow_client_does_not_make_its_replica_miss_the_read_deadline(
    make_proxy: Callable[..., ProxyThread],
    mariadb_database: CleanDatabase,
    mariadb_topology: MariaDBTopology,
) -> None:
    deadline = 0.3
    proxy = make_proxy(backends={"replica_read_timeout": deadline})
    conn = connect(proxy, mariadb_database, cursorclass=pymysql.cursors.SSCursor)
    replicas = {r.port for r in mariadb_topology.replicas}
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT @@port, REPEAT('x', {WIDTH}) FROM seq_1_to_{ROWS}")
            first = cur.fetchone()
            assert first is not None
            assert first[0] in replicas
            time.sleep(deadline * 5)  # the proxy stops reading the replica meanwhile
            rest = cur.fetchall()
        assert len(rest) == ROWS - 1
        assert all(len(row[1]) == WIDTH for row in rest)
        replica = f"127.0.0.1:{first[0]}"
        assert proxy.run(lambda: proxy.server.knowledge.healthy(replica))
    finally:
        conn.close()
