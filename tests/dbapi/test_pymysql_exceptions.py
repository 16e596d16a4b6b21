"""Code written against PyMySQL keeps catching what the wrapper raises (``pymysql.err``)."""

from __future__ import annotations

import secrets

import pymysql.err
import pytest

import consistent.dbapi as db
from consistent import errors
from consistent.policy import ReplicaKnowledge

from .conftest import Backend

NAMES = (
    "Warning",
    "Error",
    "InterfaceError",
    "DatabaseError",
    "DataError",
    "OperationalError",
    "IntegrityError",
    "InternalError",
    "ProgrammingError",
    "NotSupportedError",
)


@pytest.mark.parametrize("name", NAMES)
def test_every_class_is_also_pymysqls_class_of_that_name(name: str) -> None:
    ours = getattr(errors, name)
    theirs = getattr(pymysql.err, name)
    assert issubclass(ours, theirs)
    assert ours is not theirs  # ours are still told apart
    assert issubclass(ours, pymysql.err.MySQLError)


def test_our_own_errors_are_pymysql_errors_too() -> None:
    assert isinstance(errors.MalformedGtidSet("x"), pymysql.err.DataError)
    assert isinstance(errors.ConsistencyTimeout("late"), pymysql.err.OperationalError)
    assert isinstance(errors.RemoteProtocolError("bad"), pymysql.err.InterfaceError)


def test_a_duplicate_key_is_caught_as_pymysqls_integrity_error(backend: Backend) -> None:
    name = f"dup_{secrets.token_hex(3)}"
    conn = backend.connect()
    cur = conn.cursor()
    cur.execute(f"CREATE TABLE {name} (k INT PRIMARY KEY)")
    cur.execute(f"INSERT INTO {name} VALUES (1)")
    with pytest.raises(pymysql.err.IntegrityError) as caught:
        cur.execute(f"INSERT INTO {name} VALUES (1)")
    assert isinstance(caught.value, errors.IntegrityError)
    assert caught.value.args[0] == 1062


def test_a_missing_table_is_caught_as_pymysqls_programming_error(backend: Backend) -> None:
    conn = backend.connect()
    with pytest.raises(pymysql.err.ProgrammingError) as caught:
        conn.cursor().execute(f"SELECT * FROM missing_{secrets.token_hex(3)}")
    assert caught.value.args[0] == 1146


def test_a_closed_connection_is_caught_as_pymysqls_interface_error(backend: Backend) -> None:
    conn = backend.connect()
    conn.close()
    with pytest.raises(pymysql.err.InterfaceError):
        conn.cursor().execute("SELECT 1")


def test_a_consistency_timeout_is_caught_as_pymysqls_operational_error(
    backend: Backend, table: str
) -> None:
    conn = backend.connect(on_timeout="error", wait_timeout=0.2, knowledge=ReplicaKnowledge())
    backend.pause_all()
    try:
        cur = conn.cursor()
        cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
        with pytest.raises(pymysql.err.OperationalError) as caught:
            cur.execute(f"SELECT v FROM {table} WHERE k = 1")
    finally:
        backend.resume_all()
    assert isinstance(caught.value, errors.ConsistencyTimeout)


def test_the_sqlalchemy_dialects_error_tree_is_pymysqls_too() -> None:
    from consistent.sqlalchemy.dialect import ConsistentDialect

    dbapi = ConsistentDialect.import_dbapi()
    assert dbapi is db
    for name in NAMES:
        assert issubclass(getattr(dbapi, name), getattr(pymysql.err, name))
