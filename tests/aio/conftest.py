"""The asyncio form's scenarios run, like the DB-API ones, against real MariaDB replication
and against the emulator's topology.  Each test body is a coroutine run with ``asyncio.run``
(:func:`run`), which closes the connections the test opened on the same loop; the topology's
lag controls are blocking calls, fine between awaits."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from consistent import aio, trace
from consistent.policy import AcknowledgedWrites, ReplicaKnowledge
from consistent.telemetry import MemoryExporter, Telemetry, TelemetryConfig
from consistent.testing.replication import REPLICATION_BACKENDS, Replication, open_replication

T = TypeVar("T")


def run(backend: AsyncBackend, body: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a test's body on a fresh event loop, then close what it opened there."""

    async def main() -> T:
        try:
            return await body()
        finally:
            await backend.aclose()

    return asyncio.run(main())


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

    async def aclose(self) -> None:
        """Close every connection the test opened (politely where it is still open)."""
        opened = list(self.opened)
        self.opened.clear()
        for conn in opened:
            with contextlib.suppress(Exception):
                await conn.ensure_closed()

    def release(self) -> None:
        # A test that failed before :func:`run` closed them: no loop left, drop the sockets.
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


@dataclass
class Traced:
    """A telemetry pipeline recording into memory."""

    telemetry: Telemetry
    memory: MemoryExporter

    def spans(self, conn: aio.Connection) -> list[Mapping[str, Any]]:
        """The attributes of every span of ``conn``'s session so far, each checked against the
        documented contract."""
        assert self.telemetry.flush(10)
        session = conn.tracer.session_id
        assert session
        found = [r for r in self.memory.records if r.attributes.get(trace.SESSION_ID) == session]
        for record in found:
            assert record.attributes[trace.RECORD_KIND] == trace.RecordKind.STATEMENT
            assert trace.check_attributes(record.name, record.attributes) == ()
        return [record.attributes for record in found]


@pytest.fixture
def traced() -> Iterator[Traced]:
    memory = MemoryExporter()
    telemetry = Telemetry(TelemetryConfig(), exporters=[memory])
    try:
        yield Traced(telemetry, memory)
    finally:
        telemetry.shutdown()
