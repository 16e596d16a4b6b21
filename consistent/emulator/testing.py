"""Test support for code that drives an emulated server directly (no sockets).

A fake clock, a server factory with mysqld's deterministic test UUID, and query shortcuts, used
by the emulator's own tests and available to tests of code built on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from consistent.emulator import EmulatedServer, Outcome, ServerConfig, Session
from consistent.protocol.session_state import Gtids

#: mysqld's deterministic test UUID (``--debug=+d,server_uuid_deterministic``), reference §2.2.
U = "00000000-1111-0000-1111-000000000000"
U2 = "11111111-2222-3333-4444-555555555555"

T = TypeVar("T")

__all__ = ["U2", "FakeClock", "U", "gtids", "one", "q", "rows", "run", "scalar", "server"]


class FakeClock:
    """A clock the test moves by hand (seconds since the epoch)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine on a fresh event loop."""
    return asyncio.run(coro)


def server(clock: Callable[[], float] | None = None, **config: Any) -> EmulatedServer:
    """A server with the deterministic UUID unless told otherwise."""
    config.setdefault("server_uuid", U)
    return EmulatedServer(ServerConfig(**config), clock=clock or FakeClock())


async def q(session: Session, sql: str) -> list[Outcome]:
    """Every outcome of a query."""
    return await session.query_all(sql)


async def one(session: Session, sql: str) -> Outcome:
    """The single outcome of a one-statement query."""
    outcomes = await session.query_all(sql)
    assert len(outcomes) == 1
    return outcomes[0]


async def rows(session: Session, sql: str) -> list[tuple[object, ...]]:
    """Rows of the last result set of ``sql``."""
    outcome = (await session.query_all(sql))[-1]
    assert outcome.result is not None, sql
    return list(outcome.result.rows)


async def scalar(session: Session, sql: str) -> object:
    """The single value of a one-row, one-column result."""
    result = await rows(session, sql)
    assert len(result) == 1, result
    assert len(result[0]) == 1, result
    return result[0][0]


def gtids(outcome: Outcome) -> str | None:
    """Text of the GTIDS tracker block of an outcome (None when absent)."""
    found = [b.text for b in outcome.session_state if isinstance(b, Gtids)]
    assert len(found) <= 1
    return found[0] if found else None
