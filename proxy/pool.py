"""Backend connections shared by all sessions (multiplexing, as ProxySQL does).

There is one :class:`ConnectionPool` per backend server and backend login (user, password and
the capabilities the connection negotiated: connections that differ there cannot serve each
other's clients).  A session *borrows* a connection for one statement, or for as long as
something binds the session to it (see :func:`pin_reasons`), and gives it back afterwards.

The session's state travels with the session, not with the connection.  A connection remembers
whose state it holds (``owner``), how far in that session's replay log it got
(``applied_seq``) and, once given back, a fingerprint of that state (``state_key``: the login
character set and schema, the replayed statements).  The pool lends, in this order:

1. the connection the session itself held for a possible follow-up (``LAST_INSERT_ID()``,
   ``SHOW WARNINGS``… read the connection the previous statement ran on; see ``reserved_for``);
2. an idle connection the session used last (only the log's newer entries are replayed);
3. an idle connection whose fingerprint equals the session's (nothing to replay);
4. any idle connection (reset with COM_RESET_CONNECTION, then the whole log replayed);
5. a new connection, while the pool has fewer than ``max_connections``;

   while the pool can still open one, a connection that holds another session's prepared
   statements and came back less than ``hold_prepared`` seconds ago is not lent in 3. or 4.:
   its session is likely to come back for it, and lending it would close those statements,
   prepare this session's on it, and then the same again for the other session, statement
   after statement (a client that prepares once and executes in a loop, such as sysbench,
   would otherwise move every execution onto another session's connection);
6. a connection another session held for a follow-up (that session loses the follow-up: its
   next follow-up statement gets an error rather than another connection's answer);
7. otherwise the session waits, at most ``wait_timeout``, then gets error 1040
   (:class:`~proxy.errors.PoolExhausted`).

Choosing (:meth:`ConnectionPool.pick`), giving back and reaping are plain bookkeeping over the
pool's lists, driven by an injected clock; only :meth:`ConnectionPool.borrow` awaits (opening a
connection, waiting for one, COM_PING of a connection idle longer than ``ping_after``).
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from pymysql.charset import charset_by_id

from consistent.classify import Classification, PinReason
from consistent.protocol import ServerStatus
from proxy.backends import BackendConnection
from proxy.errors import ConnectionClosed, PoolExhausted
from proxy.relay import ResponseKind
from proxy.stream import frame_command

__all__ = [
    "ConnectionPool",
    "Fit",
    "PoolSettings",
    "charset_names",
    "pin_reasons",
]

logger = logging.getLogger(__name__)

_PING: Final = frame_command(b"\x0e")
_IN_TRANS: Final = int(ServerStatus.IN_TRANS)
_CURSOR: Final = int(ServerStatus.CURSOR_EXISTS)
#: Seconds a COM_PING of an idle connection may take.
PING_TIMEOUT: Final = 2.0

#: Pin reasons of the proxy's own (the policy's pins, ``PinReason``, come in as they are).
TRANSACTION: Final = "transaction"
OPEN_CURSOR: Final = "open_cursor"
FOLLOW_UP: Final = "follow_up"


class Fit(enum.Enum):
    """How a lent connection stands to the borrowing session's state."""

    #: Held for the session's follow-up, or used by it last: replay what is newer, if anything.
    OWN = "own"
    #: Another session's, in the same state: nothing to do.
    MATCH = "match"
    #: Another session's state: reset it, then replay the whole log.
    RESET = "reset"
    #: Just opened for the session: replay the whole log (no reset needed).
    FRESH = "fresh"


@dataclass(frozen=True, slots=True)
class PoolSettings:
    """The limits of one pool (``[pool]`` in the configuration)."""

    max_connections: int = 100
    wait_timeout: float = 5.0
    idle_timeout: float = 60.0
    ping_after: float = 10.0
    hold_prepared: float = 1.0


def pin_reasons(
    policy_pins: tuple[str, ...], *, in_transaction: bool, status: int, prepared_sql: bool = False
) -> list[str]:
    """Why a session cannot give its connection back now: the policy's pins (temporary
    tables, user variables, locks, SQL ``PREPARE``, XA…), an open transaction (as the policy
    sees it, or as the server's status says), an open cursor."""
    reasons = list(policy_pins)
    if in_transaction or status & _IN_TRANS:
        reasons.append(TRANSACTION)
    if status & _CURSOR:
        reasons.append(OPEN_CURSOR)
    if prepared_sql and PinReason.PREPARE not in reasons:
        reasons.append(PinReason.PREPARE)
    return reasons


def charset_names(collation_id: int) -> tuple[str, str] | None:
    """The character set and collation names of a handshake's collation id (``None``
    when unknown: the connection keeps the server's default after a reset)."""
    try:
        charset = charset_by_id(collation_id)
    except KeyError:
        return None
    return charset.name, charset.collation


def is_follow_up(stmt: Classification) -> bool:
    """Whether ``stmt`` reads what the previous statement left on its connection
    (``LAST_INSERT_ID()``, ``FOUND_ROWS()``, ``ROW_COUNT()``, ``SHOW WARNINGS``,
    ``@@warning_count``, ``GET DIAGNOSTICS``)."""
    return stmt.follows_previous


class ConnectionPool:
    """One server's connections for one backend login (see the module docstring)."""

    def __init__(
        self,
        name: str,
        settings: PoolSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        #: Shown in ``/status`` and in the 1040 message: ``primary 127.0.0.1:3306 as app``.
        self.name = name
        self.settings = settings
        self._clock = clock
        #: Idle connections, the most recently given back last (a dict: O(1) removal).
        self._idle: dict[BackendConnection, None] = {}
        self._borrowed: set[BackendConnection] = set()
        self._opening = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        # Counters for /status and /metrics.
        self.borrows = 0
        self.reused = 0
        self.resets = 0
        self.opened = 0
        self.revoked = 0
        self.reaped = 0
        self.ping_failures = 0
        self.exhausted = 0
        #: Statements a session prepared again on a connection of this pool that lacked them.
        self.prepared_again = 0

    # ----------------------------------------------------------------- bookkeeping

    @property
    def size(self) -> int:
        """Connections open or being opened."""
        return len(self._idle) + len(self._borrowed) + self._opening

    @property
    def idle(self) -> int:
        return len(self._idle)

    @property
    def borrowed(self) -> int:
        return len(self._borrowed)

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def idle_connections(self) -> list[BackendConnection]:
        """The idle connections (for closing what a session's statements left on them)."""
        return list(self._idle)

    def add(self, conn: BackendConnection, owner: int) -> None:
        """A connection just opened for session ``owner``: lent to it."""
        conn.owner = owner
        conn.reserved_for = 0
        conn.state_key = None
        self._borrowed.add(conn)
        self.opened += 1
        released = conn.on_released

        def gone(c: BackendConnection) -> None:
            if released is not None:
                released(c)
            self._gone(c)

        conn.on_released = gone

    def _gone(self, conn: BackendConnection) -> None:
        """``conn`` closed (idle or borrowed): a waiter may open another."""
        self._borrowed.discard(conn)
        self._idle.pop(conn, None)
        self._wake()

    def pick(
        self, owner: int, state_key: object, *, schema: bool, hold: bool = False
    ) -> tuple[BackendConnection, Fit] | None:
        """The idle connection to lend session ``owner`` (whose state's fingerprint is
        ``state_key``; ``schema``: it has a default schema), taken out of the idle list, or
        ``None`` when only a new connection (or a revoked follow-up) would do.  ``hold``:
        leave alone another session's connection that holds its prepared statements and came
        back less than ``hold_prepared`` seconds ago (see the module docstring)."""
        idle = self._idle
        best: BackendConnection | None = None
        rank = 5
        held_since = self._clock() - self.settings.hold_prepared if hold else math.inf
        for conn in reversed(idle):  # the most recently used first: the others age out
            if conn.lost:
                continue
            reserved = conn.reserved_for
            if reserved == owner:
                best, rank = conn, 0
                break
            if reserved:
                continue
            if conn.owner == owner:
                if rank > 1:
                    best, rank = conn, 1
                continue
            if conn.statements and conn.idle_since > held_since:
                continue  # its session's, for now
            if conn.state_key is not None and conn.state_key == state_key and rank > 2:
                best, rank = conn, 2
            elif rank > 3 and (schema or not conn.has_schema):
                best, rank = conn, 3
        if best is None:
            return None
        fit = Fit.OWN if rank <= 1 else Fit.MATCH if rank == 2 else Fit.RESET
        self._lend(best)
        return best, fit

    def take_own(self, owner: int, conn: BackendConnection) -> bool:
        """Synchronously, lend ``conn`` back to session ``owner`` if it is idle and still in
        that session's state (the fast path: nothing to restore but the log's newer
        entries); False when it is not, or when it has been idle long enough to be pinged
        first (the slow path does that)."""
        if (
            conn.owner != owner
            or conn not in self._idle
            or conn.reserved_for not in (0, owner)
            or conn.lost
            or self._stale(conn)
        ):
            return False
        del self._idle[conn]
        self._borrowed.add(conn)
        conn.reserved_for = 0
        self.borrows += 1
        self.reused += 1
        return True

    def _lend(self, conn: BackendConnection) -> None:
        del self._idle[conn]
        self._borrowed.add(conn)
        conn.reserved_for = 0
        self.borrows += 1
        self.reused += 1

    def _revoke(self) -> BackendConnection | None:
        """The idle connection held longest for another session's follow-up, taken."""
        for conn in self._idle:
            if conn.reserved_for and not conn.lost:
                self._lend(conn)
                self.revoked += 1
                return conn
        return None

    def give_back(self, conn: BackendConnection, *, state_key: object, follow_up: bool) -> None:
        """Session ``conn.owner`` is done with ``conn``, whose state is now ``state_key``
        (``None``: unknown, reset before lending it to another session).  ``follow_up``: keep
        it for that session's next statement unless the pool runs short."""
        if conn not in self._borrowed:
            return
        self._borrowed.discard(conn)
        if conn.lost or conn.busy:
            conn.abort()
            self._wake()
            return
        if self.size >= self.settings.max_connections:
            # Over a maximum lowered since it was opened (a reload): closed, not kept.
            conn.on_closed = None
            conn.abort()
            return
        conn.state_key = state_key
        conn.reserved_for = conn.owner if follow_up else 0
        conn.idle_since = self._clock()
        self._idle[conn] = None
        self._wake()

    def configure(self, settings: PoolSettings) -> None:
        """Adopt new limits (a reload).  Below a lowered maximum, the idle connections over it
        are closed now (the longest idle first) and borrowed ones as they are given back; a
        raised maximum lets waiting sessions open connections at once.  A new
        ``wait_timeout`` applies to the waits that start after it."""
        self.settings = settings
        excess = self.size - settings.max_connections
        for conn in list(self._idle):
            if excess <= 0:
                break
            del self._idle[conn]
            conn.on_closed = None
            conn.abort()
            excess -= 1
        for _ in range(max(0, settings.max_connections - self.size)):
            if not self._waiters:
                break
            self._wake()

    def discard(self, conn: BackendConnection) -> None:
        """A borrowed connection that must not be lent again (its state is unknown)."""
        self._borrowed.discard(conn)
        conn.abort()
        self._wake()

    def _stale(self, conn: BackendConnection) -> bool:
        return self._clock() - conn.idle_since >= self.settings.ping_after

    def reap(self) -> int:
        """Close the connections idle longer than ``idle_timeout``; how many were closed."""
        limit = self._clock() - self.settings.idle_timeout
        old = [c for c in self._idle if c.idle_since <= limit]
        for conn in old:
            del self._idle[conn]
            conn.on_closed = None
            conn.abort()
        self.reaped += len(old)
        return len(old)

    def close(self) -> None:
        """Close every idle connection (shutdown)."""
        for conn in self._idle:
            conn.on_closed = None
            conn.abort()
        self._idle.clear()

    def _wake(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def status(self) -> dict[str, object]:
        """What ``/status`` shows about this pool."""
        return {
            "name": self.name,
            "size": self.size,
            "borrowed": self.borrowed,
            "idle": self.idle,
            "waiting": self.waiting,
            "max_connections": self.settings.max_connections,
            "borrows": self.borrows,
            "opened": self.opened,
            "resets": self.resets,
            "revoked_follow_ups": self.revoked,
            "reaped": self.reaped,
            "ping_failures": self.ping_failures,
            "exhausted": self.exhausted,
            "prepared_again": self.prepared_again,
        }

    # ----------------------------------------------------------------- borrowing

    async def borrow(
        self,
        owner: int,
        state_key: object,
        open_conn: Callable[[], Awaitable[BackendConnection]],
        *,
        schema: bool,
    ) -> tuple[BackendConnection, Fit]:
        """A connection for session ``owner`` (see the module docstring for the order), and
        how it stands to the session's state.  Raises
        :class:`~proxy.errors.PoolExhausted` after ``wait_timeout`` without one, and what
        ``open_conn`` raises."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.wait_timeout
        while True:
            found = self.pick(
                owner,
                state_key,
                schema=schema,
                hold=self.size < self.settings.max_connections,
            )
            if found is not None:
                conn, fit = found
                if self._stale(conn) and not await self._ping(conn):
                    continue
                return conn, fit
            if self.size < self.settings.max_connections:
                self._opening += 1
                try:
                    conn = await open_conn()
                finally:
                    self._opening -= 1
                self.borrows += 1
                self.add(conn, owner)
                return conn, Fit.FRESH
            if self._idle:
                # Only connections unfit for this session (a schema it must not have): make
                # room for a new one.
                victim = next((c for c in self._idle if not c.reserved_for), None)
                if victim is not None:
                    del self._idle[victim]
                    victim.on_closed = None
                    victim.abort()
                    continue
            revoked = self._revoke()
            if revoked is not None:
                key = revoked.state_key
                same = key is not None and key == state_key
                return revoked, Fit.MATCH if same else Fit.RESET
            left = deadline - loop.time()
            if left <= 0:
                self.exhausted += 1
                raise PoolExhausted(
                    self.name, self.settings.max_connections, self.settings.wait_timeout
                )
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout(left):
                    await waiter
            except TimeoutError:
                pass
            finally:
                if not waiter.done():
                    waiter.cancel()
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def _ping(self, conn: BackendConnection) -> bool:
        """COM_PING of a connection idle a while; one that fails is closed."""
        try:
            data = await conn.request(_PING, ResponseKind.SIMPLE, timeout=PING_TIMEOUT)
        except (ConnectionClosed, TimeoutError, OSError):
            data = b""
        if data[4:5] == b"\x00":
            return True
        self.ping_failures += 1
        logger.info("pool %s: an idle connection failed its ping; closing it", self.name)
        self._borrowed.discard(conn)
        conn.on_closed = None
        conn.abort()
        return False
