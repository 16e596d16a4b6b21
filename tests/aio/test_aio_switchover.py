"""The asyncio form follows a switchover as the blocking one does (one session core): a
connection moves to the promoted primary at its next statement with its token and state."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from consistent import aio
from consistent.dbapi.monitor import process_monitors
from consistent.policy import AcknowledgedWrites, ReplicaKnowledge
from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.switchover import promotable_topology, wait_for

pytestmark = pytest.mark.mariadb


@pytest.fixture
def promotable() -> Iterator[MariaDBTopology]:
    with promotable_topology() as topology:
        yield topology


def test_an_asyncio_connection_moves_to_the_promoted_primary(promotable: MariaDBTopology) -> None:
    knowledge = ReplicaKnowledge()
    servers = [f"127.0.0.1:{s.port}" for s in (promotable.primary, *promotable.replicas)]

    async def body() -> None:
        conn = await aio.connect(
            primary=servers[0],
            replicas=servers[1:],
            user=promotable.app_user,
            password=promotable.app_password,
            database="sw",
            monitor_interval=0.05,
            knowledge=knowledge,
            acknowledged=AcknowledgedWrites(),
        )
        try:
            async with conn.cursor() as cur:
                await cur.execute("SET SESSION group_concat_max_len = 4343")
                await cur.execute("INSERT INTO t VALUES (1, 1)")
            roles = process_monitors().roles(knowledge, servers[0], servers)
            await asyncio.to_thread(promotable.switchover, 0)
            await asyncio.to_thread(wait_for, lambda: roles.primary == servers[1])
            async with conn.cursor() as cur:
                await cur.execute("INSERT INTO t VALUES (2, 2)")
                await cur.execute("SELECT @@port, @@group_concat_max_len FROM DUAL FOR UPDATE")
                assert await cur.fetchall() == ((promotable.primary.port, 4343),)
                await cur.execute("SELECT v FROM t ORDER BY id")
                assert await cur.fetchall() == ((1,), (2,))
            assert servers[0] in conn.replicas
        finally:
            conn.close()

    asyncio.run(body())
