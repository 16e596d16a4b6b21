"""The part of a session that awaits: backend connections, waits, preludes, resets.

Backend connections are opened lazily, per session, and brought to the session's state before
use: GTID tracking on the primary, the session-state replay log on replicas (a reopened primary
gets the log too).  Waits that cannot be pipelined run here, as do the primary-state fetches of
``read_latest``, preludes, preparing a statement on a replica, COM_RESET_CONNECTION,
COM_CHANGE_USER and KILL.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Final

from consistent.errnos import CR, ER
from consistent.errors import RemoteProtocolError
from consistent.flavors import ServerRole
from consistent.policy import (
    END_TRANSACTION,
    PRIMARY,
    Action,
    Decision,
    Reason,
    Tracking,
    WaitOutcome,
)
from consistent.policy.deadlines import wait_deadline
from consistent.policy.replay import quote_schema
from consistent.protocol import (
    parse_change_user,
)
from consistent.protocol.constants import Capability
from proxy.backends import BackendConnection, BackendUnavailable, Credentials
from proxy.clientio import ClientInput
from proxy.clientlogin import AccessDenied
from proxy.errors import WritesRefused
from proxy.handshake import BACKEND_CAPABILITIES, MIRRORED_CAPABILITIES
from proxy.pool import ConnectionPool, Fit, charset_names
from proxy.relay import ResponseKind
from proxy.sessionbase import (
    Broken,
    ReplayFailed,
)
from proxy.statements import PreparedStatement
from proxy.stream import ConnectionClosed, frame_command
from proxy.threads import Kill

__all__ = ["SlowPath"]

logger = logging.getLogger(__name__)

_DEPRECATE_EOF: Final = int(Capability.DEPRECATE_EOF)
_EXECUTE: Final = Action.EXECUTE


class SlowPath(ClientInput):
    """The awaiting part of a session (see the module docstring)."""

    def _ready_conn(self, target: str) -> BackendConnection | None:
        """``target``'s connection if it can take a statement right now (with multiplexing:
        the session's own idle one, taken back from the pool, if it is in the session's
        state)."""
        conn = self._conns.get(target)
        if conn is None:
            if not self._multiplex:
                return None
            conn = self._take_own(target)
            if conn is None:
                return None
        if conn.lost:
            return None
        if target == PRIMARY:
            want = self.policy.tracking
            if conn.tracking is not want and not self.policy.in_transaction:
                return None
            if self._servers[PRIMARY].refusing is not None:
                return None  # the slow path refuses
            if self._multiplex and conn.applied_seq < self.policy.replay_seq:
                return None
        elif conn.applied_seq < self.policy.replay_seq:
            return None
        return conn

    def _take_own(self, target: str) -> BackendConnection | None:
        """The session's own idle connection to ``target``, borrowed again synchronously."""
        conn = self._parked.get(target)
        if conn is None or self._closing:
            return None  # a closing session starts nothing (a read retried after a KILL)
        pool = self._pools.get(target)
        if pool is None or not pool.take_own(self.id, conn):
            return None
        conn.on_closed = self._backend_closed
        self._conns[target] = conn
        return conn

    def _pool(self, target: str, credentials: Credentials) -> ConnectionPool:
        pool = self._pools.get(target)
        if pool is None:
            server = self._servers[target]
            pool = self._pools[target] = self._host.pool_for(server, credentials)
        return pool

    async def _borrow(self, target: str) -> BackendConnection:
        """A pooled connection to ``target``, brought to the session's state (the replay
        log and GTID tracking follow in :meth:`_connect_ready`)."""
        server = self._servers.get(target)
        if server is None:
            raise BackendUnavailable(target, "not configured for this session")
        credentials = self._credentials()
        pool = self._pool(target, credentials)
        schema = self.database is not None or self._schema is not None
        conn, fit = await pool.borrow(
            self.id, self._fingerprint(), lambda: server.connect(credentials), schema=schema
        )
        if self._closing:
            pool.give_back(conn, state_key=None, follow_up=False)
            raise ConnectionClosed("the session closed")
        conn.on_closed = self._backend_closed
        self._conns[target] = conn
        try:
            if fit is Fit.RESET:
                pool.resets += 1
                await self._reset_pooled(conn)
            elif fit is Fit.MATCH:
                self._close_statements(conn)
                conn.applied_seq = self.policy.replay_seq
            elif fit is Fit.FRESH:
                conn.applied_seq = 0
        except BaseException:
            if self._conns.get(target) is conn:
                del self._conns[target]
            conn.on_closed = None
            pool.discard(conn)
            raise
        if conn.owner != self.id:
            conn.spare = None  # its sink and callbacks are the previous session's
        conn.owner = self.id
        if schema:
            conn.has_schema = True
        return conn

    def _close_statements(self, conn: BackendConnection) -> None:
        """Forget the prepared statements another session left on ``conn`` (closed on the
        server: COM_STMT_CLOSE has no response)."""
        for backend_id in conn.statements.values():
            conn.write(frame_command(b"\x19" + backend_id.to_bytes(4, "little")))
        conn.statements.clear()
        conn.statement_types.clear()

    async def _reset_pooled(self, conn: BackendConnection) -> None:
        """Another session's connection: COM_RESET_CONNECTION (its transaction, temporary
        tables, variables and statements go), then this session's login character set and
        schema."""
        data = await conn.request(frame_command(b"\x1f"), ResponseKind.SIMPLE, timeout=10.0)
        if data[4:5] != b"\x00":
            raise ReplayFailed("COM_RESET_CONNECTION failed")
        conn.statements.clear()
        conn.statement_types.clear()
        conn.tracking = None
        conn.applied_seq = 0
        conn.max_allowed_packet = None  # the session's value is the global one again
        statements = []
        names = charset_names(self.charset)
        if names is not None:
            statements.append(f"SET NAMES '{names[0]}' COLLATE '{names[1]}'")
        if self.database is not None:
            statements.append(quote_schema(self.database))
        for sql in statements:
            result = await conn.query(sql, timeout=10.0)
            if result.error is not None:
                raise ReplayFailed(f"{sql}: {result.error.message}")

    def _want_tracking(self) -> Tracking:
        return self.policy.tracking

    def _credentials(self) -> Credentials:
        backends = self._config.backends
        account = self._host.authenticator.users.get(self.user)
        user = backends.user
        password = backends.password
        if account is not None and account.backend_user is not None:
            user = account.backend_user
            password = account.backend_password or ""
        wanted = int(BACKEND_CAPABILITIES) | (self.caps & int(MIRRORED_CAPABILITIES))
        if not self._local_infile:
            wanted &= ~int(Capability.LOCAL_FILES)
        if not self._config.backend_deprecate_eof and not self.caps & _DEPRECATE_EOF:
            wanted &= ~_DEPRECATE_EOF
        return Credentials(
            user=user,
            password=password,
            database=self.database,
            charset=self.charset,
            capabilities=wanted,
            mariadb_capabilities=self.mariadb_caps,
        )

    async def _connect_ready(self, target: str) -> BackendConnection:
        """``target``'s connection, opened if needed and brought to the session's state."""
        if target == PRIMARY:
            refusing = self._servers[PRIMARY].refusing
            if refusing is not None:
                raise WritesRefused(PRIMARY, refusing)
        conn = self._conns.get(target)
        if (conn is None or conn.closed) and self._multiplex:
            if self._broken is not None:
                raise Broken(self._broken)
            conn = await self._borrow(target)
        elif conn is None or conn.closed:
            if self._broken is not None:
                raise Broken(self._broken)
            server = self._servers.get(target)
            if server is None:
                raise BackendUnavailable(target, "not configured for this session")
            conn = await server.connect(self._credentials())
            if self._closing:
                conn.abort()
                raise ConnectionClosed("the session closed")
            conn.on_closed = self._backend_closed
            self._conns[target] = conn
            if target == PRIMARY:
                # A first primary connection has run everything (session state goes there);
                # a reopened one gets the replayable state again.
                conn.applied_seq = 0 if self._primary_opened else self.policy.replay_seq
                self._primary_opened = True
        policy = self.policy
        if conn.applied_seq < policy.replay_seq:
            statements, seq = policy.replay_since(conn.applied_seq)
            for sql in statements:
                result = await conn.query(sql, timeout=10.0)
                if result.error is not None:
                    raise ReplayFailed(f"{sql}: {result.error.message}")
            conn.applied_seq = seq
        if target == PRIMARY:
            want = self._want_tracking()
            if conn.tracking is not want and not policy.in_transaction:
                await self._set_tracking(conn, want)
        return conn

    async def _set_tracking(self, conn: BackendConnection, want: Tracking) -> None:
        flavor = self._flavor
        mode = flavor.tracker(want)
        current: bytes | None = None
        probe = flavor.tracking_probe()
        if probe is not None:
            result = await conn.query(probe, timeout=10.0)
            current = result.scalar() or b""
        statement = flavor.tracking_statement(mode, current)
        if statement is not None:
            result = await conn.query(statement, timeout=10.0)
            if result.error is not None:
                raise BackendUnavailable(
                    conn.address.name, f"cannot turn GTID tracking on: {result.error.message}"
                )
        conn.tracking = want

    def _backend_closed(self, conn: BackendConnection) -> None:
        """A backend connection ended (idle or not): forget it; losing the primary with state
        only it held breaks the session."""
        if conn is self._stream_to:
            self._stream_lost()
        if self._conns.get(conn.name) is not conn:
            return
        del self._conns[conn.name]
        if conn.name == PRIMARY and not self._closing:
            policy = self.policy
            if policy.in_transaction or policy.pins:
                why = "a transaction" if policy.in_transaction else f"state ({policy.pinned})"
                self._broken = (
                    f"Lost connection to the primary {conn.address} while the session held "
                    f"{why} there: reconnect"
                )

    async def _slow_direct(self, target: str, client_stmt_id: int | None) -> None:
        try:
            conn = await self._connect_ready(target)
        except BackendUnavailable as down:
            self._unavailable(down)
            return
        except Broken as broken:
            self._broken_now(str(broken))
            return
        self._send_direct(conn, client_stmt_id)

    async def _slow(self, d: Decision) -> None:
        """Everything ``_execute`` could not do synchronously, ending with the command sent
        (its response then completes the command) or answered."""
        try:
            await self._slow_steps(d)
        except asyncio.CancelledError:
            raise
        except Broken as broken:
            self._broken_now(str(broken))
        except BackendUnavailable as down:
            self._unavailable(down)
        except (ConnectionClosed, TimeoutError) as lost:
            self._reply_err(
                CR.SERVER_LOST, "HY000", f"Lost connection to a backend: {lost}", self._reply_seq
            )
        except Exception:
            logger.exception("session %d: command failed", self.id)
            self._fail_command(ER.UNKNOWN_ERROR, "HY000", "internal proxy error")

    async def _slow_steps(self, d: Decision) -> None:
        policy = self.policy
        while True:
            settled = await self._settle(d)
            if settled is None:
                return
            d = settled
            if d.prelude:
                await self._prelude(d)
            try:
                conn = await self._connect_ready(d.target)
            except ReplayFailed as e:
                logger.info(
                    "session %d: state cannot follow to %s (%s): pinning", self.id, d.target, e
                )
                policy.pin("session_state")
                d = policy.route(d.statement, d.sql)
                continue
            except BackendUnavailable:
                if d.target == PRIMARY:
                    raise
                retry = policy.on_error(d, connection_lost=True)
                if retry is None:
                    raise
                d = retry
                continue
            ps = self._ps
            if (
                ps is not None
                and ps.client_id not in conn.statements
                and not await self._prepare_on(conn, ps)
            ):
                d = dataclasses.replace(
                    d,
                    target=PRIMARY,
                    reason=Reason.TIMEOUT_FALLBACK,
                    detail="prepare_error",
                    wait_set=None,
                )
                continue
            if self._streaming and conn.max_allowed_packet is None:
                await self._read_packet_limit(conn)
            self._send(conn, d)
            return

    async def _read_packet_limit(self, conn: BackendConnection) -> None:
        """Learn ``conn``'s ``max_allowed_packet`` (read-only for a session, so read once)."""
        result = await conn.query("SELECT @@max_allowed_packet", timeout=10.0)
        value = result.scalar()
        if result.error is None and value is not None and value.isdigit():
            conn.max_allowed_packet = int(value)

    async def _settle(self, d: Decision) -> Decision | None:
        """Do what the policy asks until it says EXECUTE (returned) or the command was
        answered or handed to the pipelined path (``None``)."""
        policy = self.policy
        while True:
            if self._tracing:
                self._observer.decision(d)  # the last decision is the route the span reports
            action = d.action
            if action is _EXECUTE:
                return d
            if action is Action.DEFER or action is Action.FAIL:
                self._execute(d)
                return None
            if action is Action.FETCH_PRIMARY_STATE:
                conn = await self._connect_ready(PRIMARY)
                result = await conn.query(
                    self._flavor.executed_state_statement(ServerRole.PRIMARY), timeout=10.0
                )
                if result.error is not None:
                    self._reply_err(
                        result.error.errno,
                        result.error.sqlstate,
                        result.error.message,
                        self._reply_seq,
                    )
                    return None
                d = policy.on_primary_state(d, self._flavor.parse_executed(result.scalar()))
                continue
            started = time.monotonic()
            try:
                conn = await self._connect_ready(d.target)
            except (BackendUnavailable, ReplayFailed) as e:
                logger.info("session %d: replica %s unusable for a wait: %s", self.id, d.target, e)
                d = policy.on_wait(d, WaitOutcome.FAILED, duration=time.monotonic() - started)
                continue
            if self._pipelinable(d) and (self._ps is None or self._ps.client_id in conn.statements):
                self._send_pipelined(conn, d)
                return None
            outcome = await self._wait(conn, d)
            duration = time.monotonic() - started
            self._observer.wait(d, outcome, duration, pipelined=False)
            d = policy.on_wait(d, outcome, duration=duration)

    async def _wait(self, conn: BackendConnection, d: Decision) -> WaitOutcome:
        assert d.wait_set is not None
        timeout = d.wait_timeout or self.policy.config.wait_timeout
        sql = self._flavor.wait_statement(d.wait_set, timeout)
        try:
            result = await conn.query(sql, timeout=wait_deadline(timeout))
        except (ConnectionClosed, TimeoutError) as e:
            logger.info("session %d: wait on %s failed: %s", self.id, conn.address, e)
            self._forget(conn)
            return WaitOutcome.FAILED
        return self._wait_outcome(result)

    async def _prelude(self, d: Decision) -> None:
        for target, sql in d.prelude:
            try:
                conn = await self._connect_ready(target)
                result = await conn.query(sql, timeout=None)
            except (ConnectionClosed, BackendUnavailable):
                if sql is END_TRANSACTION and target != PRIMARY:
                    continue  # the read-only transaction died with its connection
                raise
            if result.error is not None and sql is not END_TRANSACTION:
                raise BackendUnavailable(target, f"{sql} failed: {result.error.message}")
        self.policy.on_prelude_done(d)

    async def _prepare_on(self, conn: BackendConnection, ps: PreparedStatement) -> bool:
        data = await conn.request(
            frame_command(b"\x16" + ps.sql.encode("utf-8")), ResponseKind.PREPARE, timeout=None
        )
        packet = data[4:]
        if packet[:1] != b"\x00" or len(packet) < 5:
            logger.info("session %d: preparing on %s failed", self.id, conn.address)
            return False
        conn.statements[ps.client_id] = int.from_bytes(packet[1:5], "little")
        pool = self._pools.get(conn.name)
        if pool is not None:
            pool.prepared_again += 1
        return True

    # ----------------------------------------------------------------- backend connections

    async def _reset_backends(self) -> None:
        self._unreserve()
        for shared in self._pools.values():
            for idle in shared.idle_connections():
                if idle.owner == self.id:
                    idle.owner = 0  # its state is no longer this session's
                    idle.state_key = None
        for conn in list(self._conns.values()):
            pool = self._pools.get(conn.name) if self._multiplex else None
            if pool is not None and not conn.busy:
                del self._conns[conn.name]
                conn.on_closed = None
                conn.owner = 0
                pool.give_back(conn, state_key=None, follow_up=False)
                continue
            self._forget(conn)
        self._statements.clear()
        self._primary_opened = False

    async def _reset_connection(self) -> None:
        await self._reset_backends()
        self.policy.reset()
        self.last_insert_id = 0
        self.policy.level = self._user_level or self._config.level
        if self._schema is not None and self._schema != self.database:
            self.database = self._schema
        self._reply_ok()

    async def _change_user(self, payload: bytes) -> None:
        request = parse_change_user(payload, self.caps)
        client = self.client
        client.packet_mode()
        # Anything the client already sent after the command is its auth response.
        leftover = bytes(self._cbuf)
        self._cbuf.clear()
        if leftover:
            client.feed(leftover)
        try:
            account, seq = await self._host.authenticator.authenticate(
                client,
                username=request.username,
                plugin=request.auth_plugin_name or "mysql_native_password",
                auth_response=request.auth_response,
                nonce=self._nonce,
                seq=self._reply_seq - 1,
                capabilities=self.caps,
                tls=self.tls,
                host=self.peer,
            )
        except (AccessDenied, RemoteProtocolError, ConnectionClosed) as e:
            self._metrics.auth_failures += 1
            self.close(f"COM_CHANGE_USER failed: {e}")
            return
        await self._reset_backends()
        self.last_insert_id = 0
        # Another user may log in to the servers as another backend account: other pools.
        self._pools.clear()
        self._parked.clear()
        self.user = account.name
        self._user_level = account.level
        if request.charset is not None:
            self.charset = request.charset
        self.database = request.database or None
        self._schema = self.database
        self._tracer.set_namespace(self._schema)
        self.policy.reset()
        self.policy.level = self._user_level or self._config.level
        self._reply_seq = (seq + 1) & 0xFF
        client.stream(self._on_client_data)
        self._reply_ok()

    async def _kill(self, kill: Kill) -> None:
        """KILL [QUERY] of one session (by proxy id, or by its primary connection's thread
        id) or of a user's sessions: only the caller's own user's (see :mod:`proxy.threads`)."""
        sessions = self._host.sessions
        if kill.by_user:
            name = kill.user or self.user
            # The caller's other sessions: its own ends with the reply it waits for.
            targets = [
                s for s in sessions.values() if s.user == name == self.user and s is not self
            ]
        else:
            thread_id = kill.thread_id or 0
            target = sessions.get(thread_id) or next(
                (s for s in sessions.values() if s.owns_thread(PRIMARY, thread_id)), None
            )
            if target is None:
                self._reply_err(
                    ER.NO_SUCH_THREAD,
                    "HY000",
                    f"Unknown thread id: {thread_id}",
                    self._reply_seq,
                )
                return
            if target.user != self.user:
                self._reply_err(
                    ER.KILL_DENIED_ERROR,
                    "HY000",
                    f"You are not owner of thread {thread_id}",
                    self._reply_seq,
                )
                return
            targets = [target]
        itself = False
        for victim in targets:
            if victim is self:
                itself = True
                continue
            running = victim.running_threads()
            if not kill.query_only:
                victim.abort()  # its idle backend connections close with it
            await self._interrupt(running, query_only=kill.query_only)
        if itself and kill.query_only:
            self._reply_err(
                ER.QUERY_INTERRUPTED,
                "70100",
                "Query execution was interrupted",
                self._reply_seq,
            )
        elif itself:
            self._reply_err(ER.CONNECTION_KILLED, "70100", "Connection was killed", self._reply_seq)
            self.close("killed by its own KILL")
        else:
            self._reply_ok()

    async def _interrupt(self, running: list[tuple[str, int]], *, query_only: bool) -> None:
        """Stop what another session's backend connections are running, with ``KILL
        [QUERY]`` of exactly those server threads, sent on this session's own connections
        (the same proxy user, so the same backend account)."""
        verb = "KILL QUERY" if query_only else "KILL"
        for server, thread_id in running:
            try:
                mine = await self._connect_ready(server)
                await mine.query(f"{verb} {thread_id:d}", timeout=5.0)
            except (BackendUnavailable, ConnectionClosed, TimeoutError, ReplayFailed) as e:
                logger.warning("%s %d on %s failed: %s", verb, thread_id, server, e)
