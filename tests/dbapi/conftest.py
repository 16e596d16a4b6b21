"""One fixture, two servers: the DB-API scenarios run against real MariaDB replication and
against the emulator's topology, through the same :class:`Backend` interface."""

from __future__ import annotations

import contextlib
import importlib
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pymysql
import pytest

import consistent.dbapi as db
from consistent.policy import ReplicaKnowledge

EMULATOR_UNAVAILABLE = "emulator topology not available"


@dataclass
class Backend:
    """A primary with replicas and one clean database, whatever runs them."""

    name: str
    primary: str
    replicas: list[str]
    #: PyMySQL options shared by every server (user, password, database…).
    options: dict[str, Any]
    admin: Callable[[int | None], Any]  # None: primary, i: replica i (root, autocommit)
    pause: Callable[[int], None]
    resume: Callable[[int], None]
    kill: Callable[[int], None]
    restart: Callable[[int], None]
    catch_up: Callable[[], None]
    opened: list[db.Connection] = field(default_factory=list)

    def connect(self, **kwargs: Any) -> db.Connection:
        """A logical connection to the test database with its own replica knowledge."""
        params: dict[str, Any] = {"primary": self.primary, "replicas": self.replicas}
        params.update(self.options)
        params.update(kwargs)
        params.setdefault("knowledge", ReplicaKnowledge())
        conn = db.connect(**params)
        self.opened.append(conn)
        return conn

    def primary_query(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        """Run ``sql`` on the primary as the application user, outside the middleware."""
        host, _, port = self.primary.rpartition(":")
        with (
            contextlib.closing(
                pymysql.connect(host=host, port=int(port), autocommit=True, **self.options)
            ) as conn,
            conn.cursor() as cur,
        ):
            cur.execute(sql, args)
            return list(cur.fetchall())

    def close_all(self) -> None:
        for conn in self.opened:
            if conn.open:
                with contextlib.suppress(Exception):
                    conn.close()


def _mariadb_backend(request: pytest.FixtureRequest) -> Backend:
    database = request.getfixturevalue("mariadb_database")
    topology = database.topology
    primary = topology.primary
    replicas = list(topology.replicas)
    params = database.params()
    options = params.pymysql_kwargs()
    del options["host"], options["port"]

    def admin(index: int | None) -> Any:
        server = primary if index is None else replicas[index]
        return server.admin()

    return Backend(
        name="mariadb",
        primary=f"{params.host}:{params.port}",
        replicas=[f"{r.host}:{r.port}" for r in replicas],
        options=options,
        admin=admin,
        pause=topology.pause,
        resume=topology.resume,
        kill=topology.kill,
        restart=topology.restart,
        catch_up=topology.wait_for_all,
    )


@pytest.fixture(scope="session")
def dbapi_emulator_topology() -> Iterator[Any]:
    """An emulated primary and two replicas (the emulator's own replication), for the run."""
    emulator = importlib.import_module("consistent.emulator")
    start = getattr(emulator, "start_topology", None)
    if start is None:
        pytest.skip(EMULATOR_UNAVAILABLE)
    topology = start(replicas=2)
    try:
        yield topology
    finally:
        topology.close()


def _emulator_backend(request: pytest.FixtureRequest) -> Backend:
    topology = request.getfixturevalue("dbapi_emulator_topology")
    name = f"t_{secrets.token_hex(4)}"
    topology.create_database(name)
    request.addfinalizer(lambda: (topology.reset_lag(), topology.drop_database(name)))
    params = topology.connection_params(None, name)
    options = params.pymysql_kwargs()
    del options["host"], options["port"]

    def admin(index: int | None) -> Any:
        return topology.connect(index)

    return Backend(
        name="emulator",
        primary=params.address,
        replicas=[r.address for r in topology.replicas],
        options=options,
        admin=admin,
        pause=topology.pause,
        resume=topology.resume,
        kill=topology.kill,
        restart=topology.restart,
        catch_up=topology.wait_for_all,
    )


BACKENDS = [
    pytest.param("mariadb", marks=pytest.mark.mariadb, id="mariadb"),
    pytest.param("emulator", id="emulator"),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The topology under test, with a clean database."""
    factory = _mariadb_backend if request.param == "mariadb" else _emulator_backend
    backend = factory(request)
    try:
        yield backend
    finally:
        backend.close_all()


@pytest.fixture
def table(backend: Backend) -> str:
    """A fresh ``kv (k INT PRIMARY KEY, v INT)`` table, present on every replica."""
    name = f"kv_{secrets.token_hex(3)}"
    backend.primary_query(f"CREATE TABLE {name} (k INT PRIMARY KEY, v INT NOT NULL)")
    backend.catch_up()
    return name
