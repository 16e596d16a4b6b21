"""``consistent.sqlalchemy._dbapi`` is the one place that reaches into the DB-API connection;
this pins what it relies on, so a change there fails here first and loudly."""

from __future__ import annotations

from typing import TYPE_CHECKING

import consistent.dbapi
from consistent.policy import ReplicaKnowledge
from consistent.sqlalchemy._dbapi import forget_causality, raw_connection

if TYPE_CHECKING:
    from .conftest import Backend


def connect(backend: Backend) -> consistent.dbapi.Connection:
    return consistent.dbapi.connect(
        primary=f"{backend.host}:{backend.primary_port}",
        replicas=backend.replicas,
        user=backend.user,
        password=backend.password,
        database=backend.database,
        knowledge=ReplicaKnowledge(),
    )


def test_the_dbapi_connection_offers_reset_token() -> None:
    assert callable(getattr(consistent.dbapi.Connection, "reset_token", None))


def test_forget_causality_empties_the_token_and_keeps_session_state(backend: Backend) -> None:
    conn = connect(backend)
    try:
        cur = conn.cursor()
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY)")
        cur.execute("INSERT INTO a VALUES (1)")
        assert conn.token
        replay_before = conn.policy.replay_since(0)
        forget_causality(conn)
        assert conn.token == ""
        assert conn.policy.replay_since(0) == replay_before  # what replicas replay is kept
        cur.execute("INSERT INTO a VALUES (2)")
        assert conn.token  # and it tracks again from there
    finally:
        conn.close()
    forget_causality(conn)  # a closed connection is left alone


def test_raw_connection_sees_through_pool_proxies(backend: Backend) -> None:
    engine = backend.engine()
    with engine.connect() as core:
        fairy = core.connection
        raw = fairy.dbapi_connection
        assert isinstance(raw, consistent.dbapi.Connection)
        assert raw_connection(fairy) is raw
        assert raw_connection(raw) is raw
    assert raw_connection(object()) is None
    assert raw_connection(None) is None
