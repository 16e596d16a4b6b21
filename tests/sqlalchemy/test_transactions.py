"""SQLAlchemy transactions over a DB-API that reads on replicas: the primary transaction opens
at the first statement that needs it, and commit/rollback mean what they mean with PyMySQL."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import sqlalchemy as sa
from sqlalchemy import orm

import consistent.dbapi
from consistent.classify import FunctionRules, read_only_function_names
from consistent.policy import PRIMARY
from consistent.sqlalchemy.dialect import opens_transaction

if TYPE_CHECKING:
    from .conftest import Backend

metadata = sa.MetaData()
accounts = sa.Table(
    "accounts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("balance", sa.Integer, nullable=False),
)


@pytest.mark.parametrize(
    ("sql", "opens"),
    [
        ("SELECT * FROM t", False),
        ("SHOW WARNINGS", False),
        ("SET NAMES utf8mb4", False),
        ("COMMIT", False),
        ("CREATE TABLE t (a INT)", False),  # commits implicitly: a BEGIN before it is useless
        ("XA START 'x'", False),  # an XA transaction is not a local one
        ("INSERT INTO t VALUES (1)", True),
        ("UPDATE t SET a = 1", True),
        ("SELECT * FROM t FOR UPDATE", True),
        ("SELECT GET_LOCK('a', 1)", True),
        ("SAVEPOINT sa_savepoint_1", True),
        ("CREATE TEMPORARY TABLE tt (a INT)", True),
        ("SELECT audit_row(1)", True),  # a function that may write
        ("SELECT COUNT(*), NOW() FROM t", False),
    ],
)
def test_which_statements_open_the_primary_transaction(sql: str, opens: bool) -> None:
    assert opens_transaction(sql) is opens


def test_a_function_declared_read_only_opens_no_transaction() -> None:
    rules = FunctionRules("mariadb", read_only_function_names("price"))
    assert opens_transaction("SELECT price(1)", rules) is False
    assert opens_transaction("SELECT price(1), audit_row(2)", rules) is True
    assert opens_transaction("SELECT NVL(a, 1) FROM t", rules) is False
    assert opens_transaction("SELECT NVL(a, 1) FROM t", FunctionRules("mysql")) is True


class Counting:
    """Counts ``commit()`` / ``rollback()`` calls on one DB-API connection."""

    def __init__(self, raw: consistent.dbapi.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        for name in ("commit", "rollback", "begin"):
            original = getattr(raw, name)

            def wrapper(*args: Any, _name: str = name, _original: Any = original) -> Any:
                self.calls.append(_name)
                return _original(*args)

            monkeypatch.setattr(raw, name, wrapper)


def engine_for(backend: Backend, **kwargs: Any) -> sa.Engine:
    engine = backend.engine(pool_size=1, max_overflow=0, **kwargs)
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(accounts.insert(), [{"id": 1, "balance": 100}, {"id": 2, "balance": 0}])
    backend.catch_up()
    return engine


def raw_of(conn: sa.Connection) -> consistent.dbapi.Connection:
    raw = conn.connection.dbapi_connection
    assert isinstance(raw, consistent.dbapi.Connection)
    return raw


def target(conn: sa.Connection) -> str:
    decision = raw_of(conn).last_decision
    assert decision is not None
    return decision.target


def balance(conn: sa.Connection, key: int) -> int:
    value = conn.execute(sa.select(accounts.c.balance).where(accounts.c.id == key)).scalar_one()
    return int(value)


def test_reads_use_replicas_until_the_first_write(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = engine_for(backend)
    with engine.connect() as conn:
        calls = Counting(raw_of(conn), monkeypatch).calls
        assert balance(conn, 1) == 100
        assert target(conn) != PRIMARY
        assert calls == []
        conn.execute(accounts.update().where(accounts.c.id == 1).values(balance=60))
        assert calls == ["begin"]
        assert raw_of(conn).policy.in_transaction
        assert balance(conn, 1) == 60  # its own uncommitted write, on the primary
        assert target(conn) == PRIMARY
        conn.execute(accounts.update().where(accounts.c.id == 2).values(balance=40))
        conn.commit()
        assert calls == ["begin", "commit"]
        assert not raw_of(conn).policy.in_transaction
    assert backend.primary_query("SELECT balance FROM accounts ORDER BY id") == [(60,), (40,)]


def test_rollback_undoes_every_write(backend: Backend) -> None:
    engine = engine_for(backend)
    with engine.connect() as conn:
        conn.execute(accounts.update().where(accounts.c.id == 1).values(balance=0))
        conn.execute(accounts.insert().values(id=3, balance=5))
        conn.rollback()
    with engine.connect() as conn:
        assert balance(conn, 1) == 100
        assert conn.execute(sa.select(sa.func.count()).select_from(accounts)).scalar() == 2
    assert backend.primary_query("SELECT COUNT(*) FROM accounts") == [(2,)]


def test_a_read_only_transaction_sends_no_commit_or_rollback(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = engine_for(backend)
    with engine.connect() as conn:
        calls = Counting(raw_of(conn), monkeypatch).calls
        for _ in range(3):
            assert balance(conn, 2) == 0
            conn.commit()
        assert balance(conn, 1) == 100
        conn.rollback()
        assert calls == []


def test_a_locking_read_opens_the_primary_transaction(backend: Backend) -> None:
    engine = engine_for(backend)
    with engine.connect() as conn:
        stmt = sa.select(accounts.c.balance).where(accounts.c.id == 1).with_for_update()
        assert conn.execute(stmt).scalar_one() == 100
        assert target(conn) == PRIMARY
        assert raw_of(conn).policy.in_transaction
        conn.rollback()
        assert not raw_of(conn).policy.in_transaction


def test_savepoints_nest_inside_the_primary_transaction(backend: Backend) -> None:
    engine = engine_for(backend)
    with orm.Session(engine) as session:
        session.execute(accounts.update().where(accounts.c.id == 1).values(balance=1))
        nested = session.begin_nested()
        session.execute(accounts.update().where(accounts.c.id == 2).values(balance=2))
        nested.rollback()
        session.commit()
    assert backend.primary_query("SELECT balance FROM accounts ORDER BY id") == [(1,), (0,)]
    with orm.Session(engine) as session:
        session.begin_nested()  # the first statement of the transaction is the SAVEPOINT
        session.execute(accounts.delete().where(accounts.c.id == 2))
        session.rollback()
    assert backend.primary_query("SELECT COUNT(*) FROM accounts") == [(2,)]


def test_autocommit_isolation_never_opens_a_transaction(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = engine_for(backend)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        calls = Counting(raw_of(conn), monkeypatch).calls
        assert engine.dialect.detect_autocommit_setting(raw_of(conn))  # type: ignore[arg-type]
        conn.execute(accounts.update().where(accounts.c.id == 1).values(balance=7))
        assert not raw_of(conn).policy.in_transaction
        assert backend.primary_query("SELECT balance FROM accounts WHERE id = 1") == [(7,)]
        conn.rollback()  # nothing to undo: the update was committed on its own
        assert calls == []
        raw = raw_of(conn)
    # SQLAlchemy resets the isolation level at checkin: the next user gets transactions again
    assert not engine.dialect.detect_autocommit_setting(raw)  # type: ignore[arg-type]
    with engine.connect() as conn:
        conn.execute(accounts.update().where(accounts.c.id == 1).values(balance=8))
        conn.rollback()
    assert backend.primary_query("SELECT balance FROM accounts WHERE id = 1") == [(7,)]


def test_isolation_levels_reach_the_primary_and_are_reset(backend: Backend) -> None:
    engine = engine_for(backend)
    with engine.connect().execution_options(isolation_level="SERIALIZABLE") as conn:
        assert conn.get_isolation_level() == "SERIALIZABLE"
        assert balance(conn, 1) == 100
    with engine.connect() as conn:
        assert conn.get_isolation_level() == "REPEATABLE READ"
    serializable = backend.engine(isolation_level="READ COMMITTED", pool_size=1)
    with serializable.connect() as conn:
        assert conn.get_isolation_level() == "READ COMMITTED"


def test_autocommit_off_keeps_everything_on_the_primary(backend: Backend) -> None:
    engine = engine_for(backend, connect_args={"autocommit": False})
    with engine.connect() as conn:
        assert balance(conn, 1) == 100
        assert target(conn) == PRIMARY
        conn.execute(accounts.update().where(accounts.c.id == 1).values(balance=3))
        conn.rollback()
    assert backend.primary_query("SELECT balance FROM accounts WHERE id = 1") == [(100,)]


@pytest.fixture
def functions(backend: Backend, request: pytest.FixtureRequest) -> None:
    """``log_k(k)`` inserts ``k`` into ``audit``; ``twice(x)`` reads nothing (MariaDB only:
    the emulator has no stored functions).  Created by root (1419 otherwise, with the binary
    log on), run with the caller's rights."""
    if backend.name != "mariadb":
        pytest.skip("the emulator has no stored functions")
    backend.primary_query("CREATE TABLE audit (k INT PRIMARY KEY)")
    primary = request.getfixturevalue("mariadb_topology").primary
    schema = backend.database
    primary.query(
        f"CREATE FUNCTION `{schema}`.log_k(k INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA "
        "SQL SECURITY INVOKER BEGIN INSERT INTO audit VALUES (k); RETURN k; END"
    )
    primary.query(
        f"CREATE FUNCTION `{schema}`.twice(x INT) RETURNS INT DETERMINISTIC NO SQL "
        "SQL SECURITY INVOKER RETURN 2 * x"
    )
    backend.catch_up()


def test_functions_route_by_the_url_s_read_only_functions(
    backend: Backend, functions: None
) -> None:
    engine = backend.engine(backend.url(read_only_functions="twice"), pool_size=1, max_overflow=0)
    with orm.Session(engine) as session:
        value, port = session.execute(sa.text("SELECT twice(21), @@port")).one()
        assert (value, port in backend.replica_ports) == (42, True)
        conn = session.connection()
        assert not raw_of(conn).policy.in_transaction  # no BEGIN for a declared function
        assert session.execute(sa.text("SELECT log_k(5)")).scalar_one() == 5
        assert target(conn) == PRIMARY
        assert raw_of(conn).policy.in_transaction  # a function that may write opened it
        session.commit()
    assert backend.primary_query("SELECT k FROM audit") == [(5,)]
