"""The wrapper reads a server's GTIDs by that server's version (tags only from 8.3), against
emulated 8.0 and 8.4 servers over the wire."""

from __future__ import annotations

import pymysql

import consistent.dbapi as db
from consistent.emulator.config import VERSION_80, VERSION_84
from consistent.emulator.replication import Fixed, LagModel, ServerSpec, TopologySpec
from consistent.emulator.replication.threaded import start_topology
from consistent.policy import ReplicaKnowledge


def _spec(version: str) -> TopologySpec:
    base = TopologySpec.primary_with_replicas(1, lag=LagModel(network=Fixed(0.02)))
    servers = tuple(ServerSpec(s.name, version=version) for s in base.servers)
    return TopologySpec(servers=servers, channels=base.channels)


def test_the_wrapper_parses_gtids_by_the_server_version() -> None:
    for version, tags in ((VERSION_80, False), (VERSION_84, True)):
        with start_topology(_spec(version)) as topology:
            primary, replica = topology.primary, topology.replicas[0]
            conn = db.connect(
                primary=f"127.0.0.1:{primary.port}",
                replicas=[f"127.0.0.1:{replica.port}"],
                user=primary.user,
                password=primary.password,
                knowledge=ReplicaKnowledge(),
            )
            assert conn._flavor.gtid_tags is tags
            conn.close()


def test_read_latest_reads_a_tagged_executed_set_from_an_8_4_primary() -> None:
    with start_topology(_spec(VERSION_84)) as topology:
        primary, replica = topology.primary, topology.replicas[0]
        admin = pymysql.connect(
            host="127.0.0.1", port=primary.port, user=primary.user, autocommit=True
        )
        with admin.cursor() as cur:
            cur.execute(f"SET GTID_NEXT = '{primary.server_uuid}:app:1'")
            cur.execute("CREATE DATABASE tagged")
            cur.execute("SET GTID_NEXT = 'AUTOMATIC'")
            cur.execute("CREATE TABLE tagged.t (a INT)")
            cur.execute("INSERT INTO tagged.t VALUES (42)")
        admin.close()
        conn = db.connect(
            primary=f"127.0.0.1:{primary.port}",
            replicas=[f"127.0.0.1:{replica.port}"],
            user=primary.user,
            password=primary.password,
            level="read_latest",
            knowledge=ReplicaKnowledge(),
        )
        with conn.cursor() as cur:
            cur.execute("SELECT a FROM tagged.t")
            assert list(cur.fetchall()) == [(42,)]
        conn.close()
