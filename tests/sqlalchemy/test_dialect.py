"""Errors, disconnects and pings behave as with ``mysql+pymysql``; a consistency timeout is never
taken for a disconnect."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pymysql
import pytest
import sqlalchemy as sa
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy.dialects.mysql.pymysql import MySQLDialect_pymysql

import consistent.dbapi
from consistent import errors, trace
from consistent.policy import PRIMARY
from consistent.sqlalchemy import ConsistentDialect
from consistent.telemetry.appspans import provider_telemetry

if TYPE_CHECKING:
    from .conftest import Backend

#: SQLAlchemy's MySQL disconnect errnos (sqlalchemy/dialects/mysql/base.py, is_disconnect),
#: some ordinary server errnos, and our consistency timeout.
ERRNOS = [1927, 2006, 2013, 2014, 2045, 2055, 4031, 1062, 1146, 1205, 1213, 2003, 4900]

ERROR_PAIRS = [
    (pymysql.err.OperationalError, errors.OperationalError),
    (pymysql.err.ProgrammingError, errors.ProgrammingError),
    (pymysql.err.InterfaceError, errors.InterfaceError),
    (pymysql.err.InternalError, errors.InternalError),
    (pymysql.err.IntegrityError, errors.IntegrityError),
]


@pytest.fixture(scope="module")
def dialects() -> tuple[MySQLDialect_pymysql, ConsistentDialect]:
    return MySQLDialect_pymysql(dbapi=pymysql), ConsistentDialect(dbapi=consistent.dbapi)


@pytest.mark.parametrize("errno", ERRNOS)
@pytest.mark.parametrize(("theirs", "ours"), ERROR_PAIRS, ids=lambda c: c.__name__)
def test_is_disconnect_agrees_with_mysql_pymysql(
    dialects: tuple[MySQLDialect_pymysql, ConsistentDialect],
    errno: int,
    theirs: type[Exception],
    ours: type[Exception],
) -> None:
    pymysql_dialect, dialect = dialects
    message = "Lost connection to server during query"
    expected = pymysql_dialect.is_disconnect(theirs(errno, message), None, None)  # type: ignore[arg-type]
    assert dialect.is_disconnect(ours(errno, message), None, None) is expected  # type: ignore[arg-type]


@pytest.mark.parametrize("message", ["Already closed", "Connection was killed"])
def test_pymysql_message_disconnects_count_too(
    dialects: tuple[MySQLDialect_pymysql, ConsistentDialect], message: str
) -> None:
    pymysql_dialect, dialect = dialects
    assert pymysql_dialect.is_disconnect(pymysql.err.Error(message), None, None)  # type: ignore[arg-type]
    assert dialect.is_disconnect(errors.Error(message), None, None)  # type: ignore[arg-type]


def test_a_consistency_timeout_is_never_a_disconnect(
    dialects: tuple[MySQLDialect_pymysql, ConsistentDialect],
) -> None:
    _, dialect = dialects
    timeout = errors.ConsistencyTimeout("replica r1 did not reach x; connection was killed?")
    assert timeout.args[0] == 4900
    assert dialect.is_disconnect(timeout, None, None) is False  # type: ignore[arg-type]


def test_an_error_without_args_does_not_break_the_check(
    dialects: tuple[MySQLDialect_pymysql, ConsistentDialect],
) -> None:
    _, dialect = dialects
    assert dialect.is_disconnect(errors.OperationalError(), None, None) is False  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- against servers


def test_server_errors_map_to_sqlalchemy_exceptions(backend: Backend) -> None:
    engine = backend.engine()
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE u (id INT PRIMARY KEY)")
        conn.exec_driver_sql("INSERT INTO u VALUES (1)")
    with engine.connect() as conn:
        with pytest.raises(sa.exc.IntegrityError) as dup:
            conn.exec_driver_sql("INSERT INTO u VALUES (1)")
        assert isinstance(dup.value.orig, errors.IntegrityError)
        assert dup.value.orig.args[0] == 1062
        assert not dup.value.connection_invalidated
        conn.rollback()
        with pytest.raises(sa.exc.ProgrammingError) as missing:
            conn.exec_driver_sql("SELECT * FROM no_such_table")
        assert isinstance(missing.value.orig, errors.ProgrammingError)
        assert missing.value.orig.args[0] == 1146
        assert not missing.value.connection_invalidated


def test_a_consistency_timeout_leaves_the_pooled_connection_valid(backend: Backend) -> None:
    engine = backend.engine(
        backend.url(wait_timeout="0.2", on_timeout="error"), pool_size=1, max_overflow=0
    )
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    backend.catch_up()
    backend.pause(0)
    backend.pause(1)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("INSERT INTO t VALUES (1, 10)")
            conn.commit()
            raw_before = conn.connection.dbapi_connection
            with pytest.raises(sa.exc.OperationalError) as info:
                conn.exec_driver_sql("SELECT v FROM t WHERE id = 1").all()
            assert isinstance(info.value.orig, errors.ConsistencyTimeout)
            assert info.value.connection_invalidated is False
            assert not conn.invalidated
            conn.rollback()
    finally:
        backend.resume(0)
        backend.resume(1)
    with engine.connect() as conn:
        # the same DB-API connection came back from the pool, token wiped, and it still works
        assert conn.connection.dbapi_connection is raw_before
        assert conn.exec_driver_sql("SELECT v FROM t WHERE id = 1").scalar() == 10


def _kill(backend: Backend, thread_id: int) -> None:
    with contextlib.suppress(Exception):
        backend.primary_query(f"KILL {int(thread_id)}")


@pytest.mark.parametrize("driver", ["mysql+consistent", "mysql+pymysql"])
def test_pre_ping_replaces_a_connection_the_server_killed(backend: Backend, driver: str) -> None:
    """The same scenario on both dialects: the primary kills the pooled connection; the
    pre-ping notices (a disconnect errno) and the pool opens a new one transparently."""
    engine = backend.engine(backend.url(driver), pool_size=1, max_overflow=0, pool_pre_ping=True)
    with engine.connect() as conn:
        first = conn.exec_driver_sql("SELECT CONNECTION_ID()").scalar()
        raw_first = conn.connection.dbapi_connection
    assert isinstance(first, int)
    _kill(backend, first)
    with engine.connect() as conn:
        second = conn.exec_driver_sql("SELECT CONNECTION_ID()").scalar()
        assert conn.connection.dbapi_connection is not raw_first
    assert second != first


def test_do_ping_pings_the_primary(backend: Backend) -> None:
    engine = backend.engine()
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert isinstance(raw, consistent.dbapi.Connection)
        assert engine.dialect.do_ping(raw) is True
        raw.close()
        with pytest.raises(errors.InterfaceError) as info:
            engine.dialect.do_ping(raw)
        assert engine.dialect.is_disconnect(info.value, raw, None)  # type: ignore[arg-type]
        conn.invalidate()


def test_server_facts_come_from_the_primary(backend: Backend) -> None:
    engine = backend.engine()
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert isinstance(raw, consistent.dbapi.Connection)
        level = engine.dialect.get_isolation_level(raw)  # type: ignore[arg-type]
        decision = raw.last_decision
        assert decision is not None
        assert decision.target == PRIMARY
    assert level == "REPEATABLE READ"
    assert engine.dialect.server_version_info is not None
    assert engine.dialect.default_isolation_level == "REPEATABLE READ"


def test_server_side_cursors_stream_through_the_dbapi(backend: Backend) -> None:
    engine = backend.engine()
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE n (i INT PRIMARY KEY)")
        conn.exec_driver_sql("INSERT INTO n VALUES " + ",".join(f"({i})" for i in range(50)))
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True).exec_driver_sql(
            "SELECT i FROM n ORDER BY i"
        )
        assert isinstance(result.cursor, consistent.dbapi.SSCursor)
        assert [r[0] for part in result.partitions(7) for r in part] == list(range(50))


def test_connect_args_carry_the_same_options_as_the_url(backend: Backend) -> None:
    engine = backend.engine(
        backend.url("mysql+consistent"),
        connect_args={"replicas": [], "replica": backend.replicas[1], "level": "read_latest"},
    )
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert isinstance(raw, consistent.dbapi.Connection)
        assert raw.replicas == (backend.replicas[1],)
        assert raw.level == "read_latest"
        assert conn.exec_driver_sql("SELECT 1").scalar() == 1
        decision = raw.last_decision
        assert decision is not None
        assert decision.target == backend.replicas[1]


def test_connect_args_send_statement_spans_to_the_applications_provider(
    backend: Backend,
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    engine = backend.engine(
        backend.url("mysql+consistent"), connect_args={"tracer_provider": provider}
    )
    app = provider.get_tracer("app")
    with app.start_as_current_span("request") as request, engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT 1").scalar() == 1
    engine.dispose()
    assert provider_telemetry(provider).flush(10)
    selects = [s for s in exporter.get_finished_spans() if s.name == "SELECT"]
    assert selects
    for span in selects:
        assert span.parent is not None
        assert span.parent.span_id == request.get_span_context().span_id
        assert (span.attributes or {})[trace.RECORD_KIND] == "statement"
