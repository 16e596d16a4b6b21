"""The asyncio form's scenarios run, like the DB-API ones, against real MariaDB replication
and against the emulator's topology.  Each test body is a coroutine run with ``asyncio.run``
(:func:`run`); the topology's lag controls are blocking calls, fine between awaits."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from consistent import aio
from consistent.policy import AcknowledgedWrites, ReplicaKnowledge
from consistent.testing.replication import REPLICATION_BACKENDS, Replication, open_replication

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a test's coroutine on a fresh event loop."""
    return asyncio.run(coro)


@dataclass(frozen=True)
class AsyncBackend(Replication):
    """The topology under test, plus the asyncio connections the test opened on it."""

    opened: list[aio.Connection] = field(default_factory=list)
    acknowledged: AcknowledgedWrites = field(default_factory=AcknowledgedWrites)

    def params(self, **kwargs: Any) -> dict[str, Any]:
        """``connect()``'s arguments for the test database (``kwargs`` override)."""
        params: dict[str, Any] = {"primary": self.primary, "replicas": self.replicas}
        params.update(self.options)
        params.update(kwargs)
        params.setdefault("knowledge", ReplicaKnowledge())
        params.setdefault("acknowledged", self.acknowledged)
        return params

    async def connect(self, **kwargs: Any) -> aio.Connection:
        """A logical asyncio connection to the test database with its own replica knowledge."""
        conn = await aio.connect(**self.params(**kwargs))
        self.opened.append(conn)
        return conn

    def release(self) -> None:
        # The test's event loop is gone: close the sockets without a goodbye.
        for conn in self.opened:
            with contextlib.suppress(Exception):
                conn.close()


@pytest.fixture(params=REPLICATION_BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[AsyncBackend]:
    """The topology under test, with a clean database."""
    yield from open_replication(request, AsyncBackend)


@pytest.fixture
def table(backend: AsyncBackend) -> str:
    """A fresh ``kv (k INT PRIMARY KEY, v INT)`` table, present on every replica."""
    name = f"kv_{secrets.token_hex(3)}"
    backend.primary_query(f"CREATE TABLE {name} (k INT PRIMARY KEY, v INT NOT NULL)")
    backend.catch_up()
    return name
