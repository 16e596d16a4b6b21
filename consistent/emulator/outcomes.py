"""A query's outcomes one at a time: the async generator behind :meth:`Session.query`.

It lives outside :mod:`consistent.emulator.session` because that module is compiled with
mypyc, which does not compile async generators.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from consistent.emulator.results import Outcome
    from consistent.emulator.session import Session

__all__ = ["query_outcomes"]


async def query_outcomes(session: Session, sql: str) -> AsyncIterator[Outcome]:
    """Run a (multi-statement) query; one Outcome per statement (see :meth:`Session.query`)."""
    statements = session.begin_query(sql)
    try:
        last = len(statements) - 1
        for index, statement in enumerate(statements):
            yield await session.answer(statement, more=index < last)
    finally:
        await session.end_query()
