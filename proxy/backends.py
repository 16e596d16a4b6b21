"""Connections to the servers behind the proxy, and the monitor that watches each server.

:class:`BackendConnection` is one authenticated connection.  In the command phase every chunk the
server sends goes to the :class:`~proxy.relay.ResponseRelay` of the oldest outstanding command,
synchronously in ``data_received``: several commands may be in flight (a pipelined wait and
its read), their responses are consumed in order.  Internal statements (tracking setup, session
replay, waits, state reads) use :meth:`BackendConnection.query`, which collects the response.

:class:`BackendServer` is one server: it opens connections (replicas retried briefly with
tenacity backoff) and counts them.  Its :class:`HealthMonitor` keeps one connection of its own
and polls the server's executed GTID state every ``monitor_interval``: the primary's grows the
history the lag estimate is read from, a replica's feeds the policy's
:class:`~consistent.policy.ReplicaKnowledge` (executed state, health, lag: so most reads need
no wait, and none is spent on a replica that lags too much), and a failure marks the replica
unhealthy until the monitor, trying again every interval, reaches it again.  The monitor also
reads whether a replica accepts writes (``@@read_only``, ``@@super_read_only`` on MySQL), at
most once a second: a writable replica is reported in ``/status`` and logged once, when it is
first seen so.

Deadlines (:mod:`consistent.policy.deadlines`): a connection with a response outstanding is
closed when the server stays silent longer than its read deadline (the response's own, for a
wait statement), or leaves our bytes unsent longer than its write deadline.  Bytes flowing
either way count as progress, and so does the time reading is paused because the client is
slow (the silence after such a pause counts from the first check that sees reading resumed).
One timer per connection, armed while responses are outstanding, checks it; a chunk received
costs a clock read.  The outstanding responses then fail as on any lost connection, which the
session reports to the policy (a replica's read goes elsewhere once, a statement on the
primary gets 2013).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from time import monotonic
from typing import Final

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from consistent.errors import Error, RemoteProtocolError
from consistent.flavors import Flavor, ServerRole, WriteProtection
from consistent.gtid import GtidState
from consistent.policy import PRIMARY, ReplicaKnowledge, Tracking
from consistent.policy.deadlines import Deadlines, monitor_poll_timeout
from consistent.policy.roles import SharedRoles
from consistent.protocol import ServerStatus
from proxy.config import Address
from proxy.errors import BackendUnavailable
from proxy.handshake import BackendLogin, BackendLoginError, login_backend
from proxy.histogram import Histogram
from proxy.relay import QueryResult, ResponseKind, ResponseRelay, parse_response
from proxy.stream import ConnectionClosed, PacketEndpoint, frame_command, header

__all__ = [
    "BackendConnection",
    "BackendServer",
    "BackendUnavailable",
    "Credentials",
    "HealthMonitor",
]

logger = logging.getLogger(__name__)

_AUTOCOMMIT: Final = int(ServerStatus.AUTOCOMMIT)
#: Attempts to open a replica connection before the read goes elsewhere.
REPLICA_CONNECT_ATTEMPTS: Final = 2
_CONNECT_ERRORS: Final = (OSError, TimeoutError, ConnectionClosed, RemoteProtocolError)
_QUERY: Final = ResponseKind.QUERY
#: Seconds between two reads of a replica's read-only state (the monitor's interval if longer).
READ_ONLY_CHECK_INTERVAL: Final = 1.0


def _reason(exc: BaseException) -> str:
    """What went wrong, for a log or an error message: the exception's text, else its type."""
    return str(exc) or type(exc).__name__


@dataclass(frozen=True, slots=True)
class Credentials:
    """Who the proxy logs in as, and what the session's connections mirror."""

    user: str
    password: str
    database: str | None
    charset: int | None
    capabilities: int
    #: MariaDB extended capabilities wanted (those the server offers are used).
    mariadb_capabilities: int = 0

    def __repr__(self) -> str:
        return f"Credentials(user={self.user!r}, database={self.database!r})"


class BackendConnection(PacketEndpoint):
    """One authenticated connection to a server (see the module docstring)."""

    def __init__(
        self,
        name: str,
        address: Address,
        *,
        max_payload: int,
        statement_duration: Histogram | None = None,
    ) -> None:
        super().__init__(max_payload=max_payload)
        #: ``"primary"`` or the replica's name (its address).
        self.name = name
        self.address = address
        #: The server's statement-duration histogram, bound here so that the session observes
        #: a statement's duration without looking it up by label.
        self.statement_duration = (
            statement_duration if statement_duration is not None else Histogram()
        )
        self.login: BackendLogin | None = None
        #: Negotiated capabilities (and MariaDB extended ones).
        self.caps = 0
        self.mariadb_caps = 0
        #: Status flags of the last response.
        self.status = _AUTOCOMMIT
        #: GTID tracker mode set on this connection (primary only).
        self.tracking: Tracking | None = None
        #: Session-state replay number this connection has reached.
        self.applied_seq = 0
        #: The server's ``max_allowed_packet`` for this connection, once read (a streamed
        #: command larger than it is refused by the proxy, as the server would).
        self.max_allowed_packet: int | None = None
        #: Client statement id -> this server's statement id (of the owner's statements).
        self.statements: dict[int, int] = {}
        #: Pooling (:mod:`proxy.pool`): the session whose state the connection holds (0:
        #: none), the session it is kept for (a follow-up statement), a fingerprint of the
        #: state once given back (``None``: unknown), whether a default schema was ever set,
        #: and when it was given back.
        self.owner = 0
        self.reserved_for = 0
        self.state_key: object = None
        self.has_schema = False
        self.idle_since = 0.0
        #: Client statement id -> parameter types this server last received.
        self.statement_types: dict[int, bytes] = {}
        self._pending: collections.deque[ResponseRelay] = collections.deque()
        #: The relay the session reuses for the responses it passes straight to its client.
        self.spare: ResponseRelay | None = None
        #: Called (once) when the connection ends, after outstanding responses failed (the
        #: session's hook).
        self.on_closed: Callable[[BackendConnection], None] | None = None
        #: The server's accounting hook (kept apart so that a session cannot replace it).
        self.on_released: Callable[[BackendConnection], None] | None = None
        #: Seconds the server may stay silent, or leave our bytes unsent, while a response is
        #: outstanding (``None``: no limit); set once the login succeeded.
        self.read_deadline: float | None = None
        self.write_deadline: float | None = None
        #: Why the proxy closed the connection (a missed deadline), if it did.
        self.failure: str | None = None
        # Clock reading of the last progress while responses are outstanding.
        self._active_at = 0.0
        # Bytes left in the transport's write buffer, and whether reading was paused, at the
        # last check.
        self._unsent = 0
        self._was_paused = False
        self._timer: asyncio.TimerHandle | None = None

    @property
    def thread_id(self) -> int:
        """The server's connection id."""
        return self.login.connection_id if self.login is not None else 0

    @property
    def busy(self) -> bool:
        """True while a response is outstanding."""
        return bool(self._pending)

    def started(self, login: BackendLogin) -> None:
        """The login succeeded: switch to the command phase."""
        self.login = login
        self.caps = login.capabilities
        self.mariadb_caps = login.mariadb_capabilities
        self.status = login.status or _AUTOCOMMIT
        self.stream(self._on_data)

    # ----------------------------------------------------------------- command phase

    def set_deadlines(self, deadlines: Deadlines, *, replica: bool) -> None:
        """The read and write deadlines of this connection (see the module docstring)."""
        self.read_deadline = deadlines.read_for(replica=replica)
        self.write_deadline = deadlines.write

    def submit(self, data: bytes, relay: ResponseRelay) -> None:
        """Send one command (already framed) whose response ``relay`` handles.  On a
        connection already lost, ``relay`` hears so at once (from the event loop), rather
        than waiting for an answer that cannot come until its deadline."""
        if self._lost:
            self._fail_late(relay)
            return
        pending = self._pending
        if not pending:
            self._active_at = monotonic()
        pending.append(relay)
        self.transport.write(data)  # type: ignore[union-attr]
        if self._timer is None:
            self._watch(relay)

    def _fail_late(self, relay: ResponseRelay) -> None:
        callback = relay.on_lost
        if callback is not None:
            asyncio.get_running_loop().call_soon(callback, relay, None)

    def submit_many(self, items: list[tuple[bytes, ResponseRelay]]) -> None:
        """Send several commands in one write (pipelining); responses come back in order."""
        if self._lost:
            for _data, relay in items:
                self._fail_late(relay)
            return
        if not self._pending:
            self._active_at = monotonic()
        self._pending.extend([relay for _data, relay in items])
        self.write(b"".join([data for data, _relay in items]))
        if self._timer is None and items:
            self._watch(items[0][1])

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Queue bytes for sending (LOCAL INFILE data among them: progress)."""
        self._active_at = monotonic()
        super().write(data)

    # ----------------------------------------------------------------- deadlines

    def _limit(self, relay: ResponseRelay, unsent: int) -> float | None:
        """The silence allowed now: the response's own, else the write deadline while bytes
        wait to be sent, else the read deadline."""
        if relay.deadline is not None:
            return relay.deadline
        if unsent and self.write_deadline is not None:
            return self.write_deadline
        return self.read_deadline

    def _watch(self, relay: ResponseRelay) -> None:
        """Arm the deadline timer for the response ``relay`` starts (no-op without a limit)."""
        limit = self._limit(relay, 0)
        if limit is None:
            limit = self.write_deadline
        transport = self.transport
        if limit is None or transport is None or self._lost:
            return
        self._unsent = transport.get_write_buffer_size()
        self._arm(limit)

    def _arm(self, delay: float) -> None:
        """Check again in ``delay`` seconds, or sooner: never later than the read deadline,
        so that a response with a longer limit of its own (a wait) does not postpone the check
        of the one that follows it."""
        base = self.read_deadline
        if base is not None and base < delay:
            delay = base
        self._timer = asyncio.get_running_loop().call_later(delay, self._check_deadline)

    def _check_deadline(self) -> None:
        self._timer = None
        pending = self._pending
        transport = self.transport
        if self._lost or not pending or transport is None:
            return
        now = monotonic()
        unsent = transport.get_write_buffer_size()
        reading = transport.is_reading()
        if unsent < self._unsent or not reading or self._was_paused:
            # Bytes went out, or a slow client paused our reading (now, or at the last check:
            # when it resumed is not known, so the silence is counted from now).
            self._active_at = now
        self._was_paused = not reading
        self._unsent = unsent
        limit = self._limit(pending[0], unsent)
        if limit is None:
            return
        silent = now - self._active_at
        if silent < limit:
            self._arm(limit - silent)
            return
        what = "sent nothing" if not unsent else "left our bytes unsent"
        self.failure = f"the server {what} for {limit:g} s"
        logger.warning("backend %s: %s; closing the connection", self.address, self.failure)
        self.abort()

    def _on_data(self, data: bytes) -> None:
        self._active_at = monotonic()
        pending = self._pending
        try:
            while pending:
                relay = pending[0]
                used = relay.feed(data)
                if not relay.done:
                    return
                pending.popleft()
                self.status = relay.status
                callback = relay.on_done
                if callback is not None:
                    callback(relay)
                if used >= len(data):
                    return
                data = data[used:]
        except RemoteProtocolError as e:
            logger.warning("backend %s sent an invalid response: %s", self.address, e)
            self.abort()
            return
        if data and not self._lost:
            # Nothing was asked: the server is closing us (ERR 1927 on KILL, 1053 on
            # shutdown), or sends garbage.
            logger.info("backend %s sent %d unsolicited bytes; closing", self.address, len(data))
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        if exc is None and self.failure is not None:
            exc = TimeoutError(self.failure)
        pending = list(self._pending)
        self._pending.clear()
        super().connection_lost(exc)
        for relay in pending:
            callback = relay.on_lost
            if callback is not None:
                try:
                    callback(relay, exc)
                except Exception:
                    logger.exception("failure handler of %s raised", self.address)
        closed, self.on_closed = self.on_closed, None
        if closed is not None:
            closed(self)
        released, self.on_released = self.on_released, None
        if released is not None:
            released(self)

    async def request(self, data: bytes, kind: ResponseKind, timeout: float | None) -> bytes:
        """Send a framed command and collect its whole response (no translation).  Raises
        :class:`ConnectionClosed` or ``TimeoutError`` (the connection is then aborted: its
        stream position is unknown)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        buf = bytearray()
        relay = ResponseRelay(kind, self.caps, self.caps, buf.extend, status_hint=self.status)

        def finished(_relay: ResponseRelay) -> None:
            if not done.done():
                done.set_result(None)

        def lost(_relay: ResponseRelay, exc: BaseException | None) -> None:
            if not done.done():
                done.set_exception(ConnectionClosed(f"{self.address} lost: {exc}"))

        relay.on_done = finished
        relay.on_lost = lost
        relay.deadline = timeout
        self.submit(data, relay)
        try:
            async with asyncio.timeout(timeout):
                await done
        except BaseException:
            if not done.done():
                self.abort()
            raise
        return bytes(buf)

    async def query(
        self, sql: str, timeout: float | None = None, *, named: bool = False
    ) -> QueryResult:
        """Run one internal statement and return what it answered (``named``: with the
        columns' names)."""
        data = await self.request(frame_command(b"\x03" + sql.encode("utf-8")), _QUERY, timeout)
        return parse_response(data, self.caps, named=named)

    async def quit(self, timeout: float = 1.0) -> None:
        """Say goodbye (COM_QUIT) and close."""
        if not self._lost and not self._pending:
            self.write(header(1, 0) + b"\x01")
        self.close()
        await self.wait_closed(timeout)


class BackendServer:
    """One server behind the proxy: opens and counts its connections, owns its monitor."""

    def __init__(
        self,
        name: str,
        address: Address,
        *,
        connect_timeout: float,
        max_payload: int,
        tls_context: ssl.SSLContext | None,
        deadlines: Deadlines | None = None,
        statement_duration: Histogram | None = None,
    ) -> None:
        self.name = name
        self.address = address
        self.role = ServerRole.PRIMARY if name == PRIMARY else ServerRole.REPLICA
        #: Bound to every connection opened (see :class:`BackendConnection`).
        self.statement_duration = (
            statement_duration if statement_duration is not None else Histogram()
        )
        self.connect_timeout = connect_timeout
        #: The deadlines of the connections opened from now on.
        self.deadlines = deadlines if deadlines is not None else Deadlines()
        self.max_payload = max_payload
        self.tls_context = tls_context
        self.open_connections = 0
        self.connects = 0
        self.connect_failures = 0
        self.monitor: HealthMonitor | None = None
        #: Why nothing may go to this server now (split brain, ``on_split_brain = "refuse"``).
        self.refusing: str | None = None
        self.monitor_task: asyncio.Task[None] | None = None

    def _closed(self, _conn: BackendConnection) -> None:
        self.open_connections -= 1

    async def _open_once(self, credentials: Credentials) -> BackendConnection:
        loop = asyncio.get_running_loop()
        address = self.address
        try:
            async with asyncio.timeout(self.connect_timeout):
                _transport, conn = await loop.create_connection(
                    lambda: BackendConnection(
                        self.name,
                        address,
                        max_payload=self.max_payload,
                        statement_duration=self.statement_duration,
                    ),
                    address.host,
                    address.port,
                )
        except (OSError, TimeoutError) as failure:
            raise BackendUnavailable(address.name, _reason(failure)) from failure
        self.open_connections += 1
        conn.on_released = self._closed
        try:
            login = await login_backend(
                conn,
                user=credentials.user,
                password=credentials.password,
                database=credentials.database,
                charset=credentials.charset,
                capabilities=credentials.capabilities,
                max_packet_size=self.max_payload,
                tls_context=self.tls_context,
                server_hostname=address.host if self.tls_context is not None else None,
                timeout=self.connect_timeout,
                mariadb_capabilities=credentials.mariadb_capabilities,
            )
        except BackendLoginError as refused:
            conn.abort()
            raise BackendUnavailable(address.name, refused.msg, login_error=refused) from refused
        except (*_CONNECT_ERRORS, ssl.SSLError) as lost:
            conn.abort()
            raise BackendUnavailable(address.name, _reason(lost)) from lost
        except BaseException:
            conn.abort()
            raise
        conn.started(login)
        conn.set_deadlines(self.deadlines, replica=self.role is ServerRole.REPLICA)
        return conn

    async def connect(self, credentials: Credentials) -> BackendConnection:
        """A new authenticated connection.  Replicas get a second attempt after a short
        backoff, unless the first took all of ``connect_timeout`` (a server that accepts and
        never answers costs one); the primary fails at once (the client sees the error)."""
        attempts = 1 if self.role is ServerRole.PRIMARY else REPLICA_CONNECT_ATTEMPTS
        retrying = AsyncRetrying(
            stop=stop_after_attempt(attempts) | stop_after_delay(self.connect_timeout),
            wait=wait_exponential(multiplier=0.05, max=0.5),
            retry=retry_if_exception_type(BackendUnavailable),
            reraise=True,
        )
        try:
            conn: BackendConnection = await retrying(self._open_once, credentials)
        except BackendUnavailable:
            self.connect_failures += 1
            raise
        self.connects += 1
        return conn

    def status(self, knowledge: ReplicaKnowledge, flavor: Flavor | None) -> dict[str, object]:
        """What ``/status`` shows about this server."""
        info: dict[str, object] = {
            "name": self.name,
            "address": self.address.name,
            "role": self.role.value,
            "open_connections": self.open_connections,
            "connects": self.connects,
            "connect_failures": self.connect_failures,
        }
        monitor = self.monitor
        if monitor is not None:
            info.update(monitor.status())
        if self.role is ServerRole.REPLICA:
            view = knowledge.view(self.name)
            info["known_executed"] = (
                flavor.format_state(view.executed)
                if flavor is not None and view.executed is not None
                else None
            )
            info["failures"] = view.failures
            info["healthy"] = view.healthy(knowledge.now())
            info["lag_estimate"] = view.lag
            info["picks"] = view.picks
        return info


class HealthMonitor:
    """Polls one server's executed GTID state on a connection of its own.

    ``flavor`` is a callable because the flavour may be detected after the monitor starts.
    Every ``interval`` seconds: one ``SELECT`` of the executed state, which may take
    :func:`~consistent.policy.deadlines.monitor_poll_timeout`.  The primary's state goes to
    ``knowledge``'s history, a replica's to ``knowledge.record_poll`` (state, health, lag);
    when the server cannot be reached the replica is marked failed and reconnection is retried
    (``tenacity``) every ``max_backoff`` seconds at most (default: the interval, so that a
    recovered replica is back one interval after it answers).
    """

    def __init__(
        self,
        server: BackendServer,
        credentials: Credentials,
        knowledge: ReplicaKnowledge,
        flavor: Callable[[], Flavor | None],
        *,
        interval: float,
        primary: str,
        max_backoff: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.server = server
        #: The primary's address: the history a replica's state is compared with.
        self.primary = primary
        self._credentials = credentials
        self._knowledge = knowledge
        self._flavor = flavor
        self.interval = interval
        self._max_backoff = max_backoff if max_backoff is not None else max(interval, 0.05)
        self._clock = clock
        self._stop = asyncio.Event()
        self._conn: BackendConnection | None = None
        self.healthy: bool | None = None
        self.last_ok: float | None = None
        self.last_error: str | None = None
        # The last executed state polled, formatted only when ``/status`` asks (``executed``),
        # and the raw answer it was parsed from (an unchanged answer is not parsed again).
        self._state: GtidState | None = None
        self._state_flavor: Flavor | None = None
        self._raw_state: bytes | None = None
        self.polls = 0
        self.server_version: str | None = None
        self.server_charset: int | None = None
        #: The MariaDB extended capabilities the server offers (0: none, or MySQL).
        self.server_mariadb_capabilities = 0
        self.first_login = asyncio.Event()
        #: Whether the server refuses writes, as last read (``None`` before the first read,
        #: or when the server would not say).
        self.write_protection: WriteProtection | None = None
        #: The ``host:port`` of each source the server replicates from, as last read
        #: (``None`` before the first read, or when the server would not say).
        self.sources: frozenset[str] | None = None
        #: Called after each read of the roles (the server's read-only state and sources):
        #: the proxy's role discovery looks at every monitor then.
        self.on_roles: Callable[[HealthMonitor], None] | None = None
        #: The topology's roles (role discovery): a replica's poll feeds the knowledge only
        #: once they trust it, and a new primary reads its history for them.
        self.roles: SharedRoles | None = None
        #: Called once the new primary's history is read (see ``roles``).
        self.on_history: Callable[[HealthMonitor], None] | None = None
        #: A primary's monitor lists the replicas connected to it at every poll (replica
        #: discovery), in ``replica_hosts`` (``host:port``), then calls ``on_replica_hosts``.
        self.list_replicas = False
        self._replicas_refused = False
        self.replica_hosts: frozenset[str] | None = None
        self.on_replica_hosts: Callable[[HealthMonitor], None] | None = None
        # When the read-only state is next due (the monitor's clock); 0: at the next poll.
        self._read_only_due = 0.0
        #: Seconds between reads of the roles (the read-only state and the sources).
        self.read_only_interval = READ_ONLY_CHECK_INTERVAL
        self._sources_due = 0.0

    @property
    def executed(self) -> str | None:
        """The server's executed GTID state as last polled, formatted (``None`` before the
        first poll)."""
        state = self._state
        flavor = self._state_flavor
        if state is None or flavor is None:
            return None
        return flavor.format_state(state)

    def status(self) -> dict[str, object]:
        ago = None if self.last_ok is None else round(self._clock() - self.last_ok, 3)
        info: dict[str, object] = {
            "monitor_healthy": self.healthy,
            "monitor_last_ok_seconds_ago": ago,
            "monitor_last_error": self.last_error,
            "monitor_executed": self.executed,
            "monitor_polls": self.polls,
            "server_version": self.server_version,
        }
        protection = self.write_protection
        info["read_only"] = protection.read_only if protection is not None else None
        info["super_read_only"] = protection.super_read_only if protection is not None else None
        info["writable"] = protection.writable if protection is not None else None
        info["replicates_from"] = sorted(self.sources) if self.sources is not None else None
        return info

    def set_credentials(self, credentials: Credentials) -> None:
        """Use these credentials from the next (re)connection on (a configuration reload)."""
        self._credentials = credentials

    def stop(self) -> None:
        """Ask :meth:`run` to end."""
        self._stop.set()
        conn = self._conn
        if conn is not None:
            conn.abort()

    def _failed(self, reason: str) -> None:
        if self.healthy is not False:
            logger.warning("backend %s is unreachable: %s", self.server.address, reason)
        self.healthy = False
        self.last_error = reason
        if self.server.role is ServerRole.REPLICA:
            self._knowledge.record_failure(self.server.name)

    def _before_sleep(self, state: RetryCallState) -> None:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        self._failed(str(exc) if exc is not None else "unknown error")

    async def _connect(self) -> BackendConnection:
        retrying = AsyncRetrying(
            wait=wait_exponential(multiplier=max(self.interval, 0.05), max=self._max_backoff),
            retry=retry_if_exception_type(BackendUnavailable),
            before_sleep=self._before_sleep,
        )
        conn: BackendConnection = await retrying(self.server._open_once, self._credentials)
        login = conn.login
        if login is not None:
            self.server_version = login.server_version
            self.server_charset = login.charset
            self.server_mariadb_capabilities = login.server_mariadb_capabilities
        self.first_login.set()
        return conn

    async def _poll(self, conn: BackendConnection, timeout: float) -> None:
        flavor = self._flavor()
        if flavor is None:
            return
        started = self._knowledge.now()
        result = await conn.query(flavor.executed_state_statement(self.server.role), timeout)
        if result.error is not None:
            raise BackendUnavailable(self.server.address.name, result.error.message)
        raw = result.scalar()
        state = self._state
        if state is None or raw != self._raw_state or flavor is not self._state_flavor:
            state = flavor.parse_executed(raw)
            self._state = state
            self._state_flavor = flavor
            self._raw_state = raw
        self.polls += 1
        if self.healthy is False:
            logger.info("backend %s is reachable again", self.server.address)
        self.healthy = True
        self.last_ok = self._clock()
        self.last_error = None
        roles = self.roles
        if self.server.role is not ServerRole.REPLICA:
            self._knowledge.record_primary_state(self.primary, state)
            if roles is not None and roles.wants_history(self.server.address.name):
                await self._read_history(conn, flavor, roles, timeout)
            if self.list_replicas:
                await self._list_replicas(conn, flavor, timeout)
        elif roles is None or roles.trusts(self.server.name, state, flavor):
            self._knowledge.record_poll(
                self.server.name, state, started=started, primary=self.primary
            )
        else:
            self._knowledge.record_failure(self.server.name)  # not to be read from
        now = self._clock()
        if now >= self._read_only_due:
            await self._check_read_only(conn, flavor, timeout)
            # Only a writable server's sources decide a role: a read-only one's are read
            # once a second, for /status (SHOW SLAVE STATUS contends with the replica's own
            # replication threads).
            protection = self.write_protection
            if protection is None or protection.writable or now >= self._sources_due:
                self._sources_due = now + READ_ONLY_CHECK_INTERVAL
                await self._check_sources(conn, flavor, timeout)
            if self.on_roles is not None:
                self.on_roles(self)

    async def _list_replicas(self, conn: BackendConnection, flavor: Flavor, timeout: float) -> None:
        """The replicas connected to this primary (those that report a host)."""
        result = await conn.query(flavor.replica_hosts_statement(), timeout, named=True)
        if result.error is not None:
            # Once at WARNING: the feature was asked for, and the backend user may lack the
            # privilege (REPLICATION MASTER ADMIN on MariaDB, REPLICATION SLAVE on MySQL).
            log = logger.debug if self._replicas_refused else logger.warning
            self._replicas_refused = True
            log(
                "backend %s: cannot list its replicas: %s",
                self.server.address,
                result.error.message,
            )
            return
        try:
            self.replica_hosts = flavor.parse_replica_hosts(result.columns, result.rows)
        except Error as e:
            logger.debug("backend %s: replicas unknown: %s", self.server.address, e)
            return
        if self.on_replica_hosts is not None:
            self.on_replica_hosts(self)

    async def _read_history(
        self, conn: BackendConnection, flavor: Flavor, roles: SharedRoles, timeout: float
    ) -> None:
        """This server became the primary: what it has of the history, for the sessions to
        tell whether the change lost GTIDs they required, and for the replicas to be checked
        against."""
        result = await conn.query(flavor.history_statement(), timeout)
        if result.error is not None or not result.rows:
            reason = result.error.message if result.error is not None else "no row"
            logger.warning("backend %s: history unknown: %s", self.server.address, reason)
            return
        roles.history = (self.server.address.name, tuple(result.rows[0]))
        if self.on_history is not None:
            self.on_history(self)

    async def _check_read_only(
        self, conn: BackendConnection, flavor: Flavor, timeout: float
    ) -> None:
        """Read whether the replica refuses writes; log when it is first seen writable (and
        when it is read-only again), not at every read."""
        self._read_only_due = self._clock() + max(self.read_only_interval, self.interval)
        result = await conn.query(flavor.read_only_statement(), timeout)
        if result.error is not None or not result.rows:
            # The last state read stays: a server that will not say has not changed.
            reason = result.error.message if result.error is not None else "no row"
            logger.debug("backend %s: read-only state unknown: %s", self.server.address, reason)
            return
        protection = flavor.parse_read_only(result.rows[0])
        before = self.write_protection
        self.write_protection = protection
        if self.server.role is not ServerRole.REPLICA:
            return  # a writable primary is the rule; role discovery reads the rest
        if protection.writable and (before is None or not before.writable):
            logger.warning(
                "replica %s accepts writes (@@read_only is off): a write sent to it by "
                "mistake would change it and break replication; set read_only=ON",
                self.server.address,
            )
        elif before is not None and before.writable and not protection.writable:
            logger.info("replica %s is read-only again", self.server.address)

    async def _check_sources(self, conn: BackendConnection, flavor: Flavor, timeout: float) -> None:
        """Read which servers this one replicates from (for role discovery)."""
        result = await conn.query(flavor.replication_sources_statement(), timeout, named=True)
        if result.error is not None:
            logger.debug(
                "backend %s: replication sources unknown: %s",
                self.server.address,
                result.error.message,
            )
            return
        try:
            self.sources = flavor.parse_replication_sources(result.columns, result.rows)
        except Error as e:
            logger.debug("backend %s: replication sources unknown: %s", self.server.address, e)

    async def run(self) -> None:
        """Poll until :meth:`stop`."""
        timeout = monitor_poll_timeout(self.interval)
        while not self._stop.is_set():
            conn: BackendConnection | None = None
            try:
                conn = self._conn = await self._connect()
                self._read_only_due = 0.0  # read it again on a new connection
                while not self._stop.is_set():
                    await self._poll(conn, timeout)
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.interval):
                            await self._stop.wait()
            except (BackendUnavailable, ConnectionClosed, TimeoutError, OSError, Error) as e:
                if not self._stop.is_set():
                    self._failed(_reason(e))
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(min(self._max_backoff, self.interval * 2)):
                            await self._stop.wait()
            finally:
                self._conn = None
                if conn is not None:
                    conn.abort()
