"""Functions that wait: ``WAIT_FOR_EXECUTED_GTID_SET`` and ``SLEEP``.

``WAIT_FOR_EXECUTED_GTID_SET(gtid_set[, timeout])`` follows ``Item_wait_for_executed_gtid_set``
(reference §3.4), checks in this order:

1. a NULL set is 1772 (``'NULL'``);
2. a NULL or negative timeout is 1210;
3. in a replication applier thread the result is NULL;
4. ``gtid_mode=OFF`` is 3062;
5. a malformed set is 1772;
6. a set containing a GTID this session owns is 3173.

Then it returns 0 once the set is contained in ``gtid_executed`` (at once for ``''``) and 1
when ``timeout`` seconds pass first; no timeout or 0 waits forever; fractions count.  The
wait is a future resolved by commits (:class:`~consistent.emulator.waiters.WaitRegistry`);
KILL QUERY interrupts it with 1317.

With column arguments the function is evaluated per row inside SQLite (:func:`check_now`):
a row whose set is not executed yet stops the statement with :class:`WaitNeeded`, the session
waits (:func:`satisfy`) and runs the statement again; a wait that timed out answers 1 for that
set and timeout during the rest of the statement.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Final

from consistent.emulator.config import GtidMode
from consistent.emulator.errors import ER, SqlError, sql_error
from consistent.emulator.gtid_state import parse_gtid_set
from consistent.gtid import GtidSet

if TYPE_CHECKING:
    from consistent.emulator.session import Session

__all__ = ["WaitNeeded", "call", "check_now", "satisfy", "wait_for_executed_gtid_set"]

_WAIT: Final = "WAIT_FOR_EXECUTED_GTID_SET"


def _number(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float | Decimal):
        return float(value)
    text = value.decode() if isinstance(value, bytes) else str(value)
    try:
        return float(text.strip() or 0)
    except ValueError:
        return 0.0


class WaitNeeded(SqlError):
    """Raised inside SQLite by a per-row ``WAIT_FOR_EXECUTED_GTID_SET`` (column arguments) whose
    set is not executed yet: the session awaits it (:func:`satisfy`) and runs the statement
    again.  It never reaches a client."""

    def __init__(self, required: GtidSet, timeout: float | None) -> None:
        super().__init__(int(ER.UNKNOWN_ERROR), "waiting for GTIDs", "HY000")
        self.required = required
        self.timeout = timeout

    @property
    def key(self) -> tuple[str, float | None]:
        """What a per-row call remembers once this wait timed out."""
        return str(self.required), self.timeout


def _checked(session: Session, args: Sequence[object]) -> tuple[GtidSet, float | None] | None:
    """The argument and environment checks, in mysqld's order; None for the NULL result."""
    if len(args) not in (1, 2):
        raise sql_error(ER.WRONG_PARAMCOUNT_TO_NATIVE_FCT, _WAIT)
    text = args[0]
    if text is None:
        raise sql_error(ER.MALFORMED_GTID_SET_SPECIFICATION, "NULL")
    timeout: float | None = None
    if len(args) == 2:
        timeout = _number(args[1])
        if timeout is None or timeout < 0:
            raise sql_error(ER.WRONG_ARGUMENTS, _WAIT + ".")
    if session.system:
        return None
    state = session.server.gtid_state
    if state.mode is GtidMode.OFF:
        raise sql_error(ER.GTID_MODE_OFF, "use " + _WAIT)
    spec = text.decode() if isinstance(text, bytes) else str(text)
    required = parse_gtid_set(spec, tags=session.server.config.gtid_tags)
    owned_error = state.check_not_owned(required, session.connection_id)
    if owned_error is not None:
        raise owned_error
    return required, timeout or None


async def _wait(session: Session, required: GtidSet, timeout: float | None) -> int:
    state = session.server.gtid_state
    if required.issubset(state.executed):
        return 0
    future = state.waiters.wait(required, state.executed)
    try:
        await session.interruptible(asyncio.shield(future), timeout)
    except TimeoutError:
        return 1
    finally:
        state.waiters.discard(future)
        if not future.done():
            future.cancel()
    return 0


async def wait_for_executed_gtid_set(session: Session, args: list[object]) -> int | None:
    """The function's value; see the module docstring for the rules."""
    checked = _checked(session, args)
    if checked is None:
        return None
    return await _wait(session, *checked)


def check_now(session: Session, args: Sequence[object]) -> int | None:
    """The value of a per-row call (column arguments) without waiting: 0 when the set is
    executed, 1 when a wait for it already timed out in this statement, else
    :class:`WaitNeeded`."""
    checked = _checked(session, args)
    if checked is None:
        return None
    required, timeout = checked
    if required.issubset(session.server.gtid_state.executed):
        return 0
    need = WaitNeeded(required, timeout)
    if need.key in session.timed_out_waits:
        return 1
    raise need


async def satisfy(session: Session, need: WaitNeeded) -> None:
    """Wait for what a per-row call needs; a timeout is remembered for the statement's rerun."""
    if await _wait(session, need.required, need.timeout) == 1:
        session.timed_out_waits.add(need.key)


async def sleep(session: Session, args: list[object]) -> int:
    """SLEEP(seconds): 0, or 1 when KILL QUERY interrupts it (as mysqld does)."""
    if len(args) != 1:
        raise sql_error(ER.WRONG_PARAMCOUNT_TO_NATIVE_FCT, "SLEEP")
    seconds = _number(args[0]) or 0.0
    try:
        await session.interruptible(asyncio.sleep(max(seconds, 0.0)), None)
    except Exception as exc:  # interrupted: SLEEP returns 1 instead of failing
        if isinstance(exc, SqlError) and exc.code == ER.QUERY_INTERRUPTED:
            return 1
        raise
    return 0


async def _wait_until_sql_thread(session: Session, args: list[object]) -> int | None:
    if len(args) not in (1, 2, 3):
        raise sql_error(ER.WRONG_PARAMCOUNT_TO_NATIVE_FCT, "WAIT_UNTIL_SQL_THREAD_AFTER_GTIDS")
    result = await wait_for_executed_gtid_set(session, args[:2])
    return -1 if result == 1 else result


_CALLS: Final[dict[str, Callable[[Session, list[object]], Awaitable[object]]]] = {
    _WAIT: wait_for_executed_gtid_set,
    "SLEEP": sleep,
    "WAIT_UNTIL_SQL_THREAD_AFTER_GTIDS": _wait_until_sql_thread,
}


async def call(session: Session, name: str, args: list[object]) -> object:
    """Evaluate one waiting function."""
    return await _CALLS[name](session, args)
