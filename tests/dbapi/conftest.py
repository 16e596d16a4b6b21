"""One fixture, two servers: the DB-API scenarios run against real MariaDB replication and
against the emulator's topology, through the same :class:`Backend` interface."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import consistent.dbapi as db
from consistent.policy import AcknowledgedWrites, ReplicaKnowledge
from consistent.testing.replication import REPLICATION_BACKENDS, Replication, open_replication


@dataclass(frozen=True)
class Backend(Replication):
    """The topology under test, plus the DB-API connections the test opened on it."""

    opened: list[db.Connection] = field(default_factory=list)
    #: What the primary acknowledged to the test's connections: they share it, as the
    #: connections of one process do, and no other test's writes are in it.
    acknowledged: AcknowledgedWrites = field(default_factory=AcknowledgedWrites)

    def connect(self, **kwargs: Any) -> db.Connection:
        """A logical connection to the test database with its own replica knowledge."""
        params: dict[str, Any] = {"primary": self.primary, "replicas": self.replicas}
        params.update(self.options)
        params.update(kwargs)
        params.setdefault("knowledge", ReplicaKnowledge())
        params.setdefault("acknowledged", self.acknowledged)
        conn = db.connect(**params)
        self.opened.append(conn)
        return conn

    def release(self) -> None:
        for conn in self.opened:
            if conn.open:
                with contextlib.suppress(Exception):
                    conn.close()


@pytest.fixture(params=REPLICATION_BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The topology under test, with a clean database."""
    yield from open_replication(request, Backend)


@pytest.fixture
def table(backend: Backend) -> str:
    """A fresh ``kv (k INT PRIMARY KEY, v INT)`` table, present on every replica."""
    name = f"kv_{secrets.token_hex(3)}"
    backend.primary_query(f"CREATE TABLE {name} (k INT PRIMARY KEY, v INT NOT NULL)")
    backend.catch_up()
    return name
