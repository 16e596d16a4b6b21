"""A session's backend connections: opened or borrowed, brought to its state, given back.

Connections are opened lazily, per session, and brought to the session's state before use:
GTID tracking on the primary, the session-state replay log on replicas (a reopened primary gets
the log too).  With multiplexing (:mod:`proxy.pool`) they are borrowed from the shared pools
for a statement, or while something binds the session to them (a transaction, a pin, a
cursor); after each command the others go back, the one the command ran on kept for a
follow-up statement (``LAST_INSERT_ID()``…) while the pool can spare it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Final, TypeGuard

from consistent.classify import PinReason
from consistent.policy import PRIMARY
from consistent.policy.driver import ReadyKind, is_ready, ready_steps
from consistent.policy.replay import quote_schema
from consistent.protocol import ServerStatus
from consistent.protocol.constants import Capability
from proxy.backends import BackendConnection, BackendServer, BackendUnavailable, Credentials
from proxy.errors import Broken, ReplayFailed, WritesRefused
from proxy.handshake import BACKEND_CAPABILITIES, MIRRORED_CAPABILITIES
from proxy.pool import ConnectionPool, Fit, charset_names, pin_reasons
from proxy.relay import ResponseKind
from proxy.statements import PreparedStatement
from proxy.stream import ConnectionClosed, frame_command

if TYPE_CHECKING:
    from proxy.session import Session

__all__ = ["BackendSet"]

logger = logging.getLogger(__name__)

#: Server status flags that bind a session to its connection (see proxy.pool.pin_reasons).
_BINDING_STATUS: Final = int(ServerStatus.IN_TRANS | ServerStatus.CURSOR_EXISTS)
_NO_BACKSLASH_ESCAPES: Final = int(ServerStatus.NO_BACKSLASH_ESCAPES)
_DEPRECATE_EOF: Final = int(Capability.DEPRECATE_EOF)
_PROBE: Final = ReadyKind.PROBE
_REPLAY: Final = ReadyKind.REPLAY


class BackendSet:
    """The backend connections of one session (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._servers = dict(session.host.servers())
        #: The backend connections the session holds now (with multiplexing: borrowed from
        #: the shared pools for a statement, or while something binds the session to them).
        self.conns: dict[str, BackendConnection] = {}
        self.multiplex = session.config.pool.multiplexing
        self._pools: dict[str, ConnectionPool] = {}
        #: The connection given back with the last statement's after-effects
        #: (``LAST_INSERT_ID()``…), kept for a follow-up statement unless the pool needs it.
        self.follow: BackendConnection | None = None
        #: The connection last given back, per server (taken back on the fast path if it is
        #: still idle and in this session's state).
        self._parked: dict[str, BackendConnection] = {}
        # The fingerprint of the session's state, cached with what it was computed from.
        self._print: object = None
        self._print_of: tuple[int, str | None, int] = (-1, None, 0)
        #: The primary's status flags at its last answer (NO_BACKSLASH_ESCAPES, for the
        #: proxy's own statement parsing, when no primary connection is held).
        self._primary_status = 0
        self._primary_opened = False
        #: Why the session cannot go on (the primary was lost with state only it had).
        self.broken: str | None = None

    # ----------------------------------------------------------------- what the session holds

    def backend_thread(self, server: str) -> int | None:
        """The server's thread id of this session's connection to ``server``, if open."""
        conn = self.conns.get(server)
        return conn.thread_id if conn is not None and not conn.closed else None

    def owns_thread(self, server: str, thread_id: int) -> bool:
        """Whether server thread ``thread_id`` of ``server`` is this session's (see
        :meth:`proxy.session.Session.owns_thread`)."""
        if self.backend_thread(server) == thread_id:
            return True
        pool = self._pools.get(server)
        if pool is None:
            return False
        own = self._session.id
        return any(
            c.owner == own and c.thread_id == thread_id and not c.closed
            for c in pool.idle_connections()
        )

    def running_threads(self) -> list[tuple[str, int]]:
        """``(server, thread id)`` of the connections running something for the session."""
        return [(c.name, c.thread_id) for c in self.conns.values() if c.busy and not c.closed]

    def holds(self, conn: BackendConnection | None) -> TypeGuard[BackendConnection]:
        """Whether ``conn`` is open and the session's (not given back to a pool)."""
        if conn is None or conn.closed:
            return False
        return not self.multiplex or self.conns.get(conn.name) is conn

    def backslash_escapes(self) -> bool:
        """False when the session's server says ``NO_BACKSLASH_ESCAPES`` is on."""
        conn = self.conns.get(PRIMARY)
        if conn is None:
            return not self._primary_status & _NO_BACKSLASH_ESCAPES
        return not conn.status & _NO_BACKSLASH_ESCAPES

    def forget(self, conn: BackendConnection) -> None:
        """Close ``conn``, whose stream position is unknown, and stop holding it."""
        if self.conns.get(conn.name) is conn:
            del self.conns[conn.name]
        conn.abort()

    def primary_moved(self, server: BackendServer) -> bool:
        """``server`` is the primary now: drop what the session had of the old one; False
        when it already was."""
        if self._servers.get(PRIMARY) is server:
            return False
        self._servers[PRIMARY] = server
        self._pools.pop(PRIMARY, None)
        self._parked.pop(PRIMARY, None)
        conn = self.conns.get(PRIMARY)
        if conn is not None:
            conn.abort()
        return True

    # ----------------------------------------------------------------- pooled connections

    def pin_reasons(self) -> dict[str, list[str]]:
        """Why the session holds each of its connections now (server -> reasons)."""
        policy = self._session.policy
        txn = policy.transaction
        found: dict[str, list[str]] = {}
        pins = policy.pins
        if not policy.autocommit:
            # Every statement opens a transaction the server keeps until COMMIT.
            pins = (*pins, PinReason.AUTOCOMMIT_OFF)
        for name, conn in self.conns.items():
            reasons = pin_reasons(
                pins if name == PRIMARY else (),
                in_transaction=txn is not None and txn.server == name,
                status=conn.status,
            )
            if reasons:
                found[name] = reasons
        return found

    def _state_key(self, conn: BackendConnection) -> object:
        """The fingerprint of the state ``conn`` holds for this session (``None`` when it
        is behind the session's log: the next session resets it)."""
        if conn.applied_seq < self._session.policy.replay_seq:
            return None
        return self._fingerprint()

    def _fingerprint(self) -> object:
        """The session's state as a value: login schema and character set, replay log."""
        session = self._session
        of = (session.policy.replay_seq, session.database, session.charset)
        if of != self._print_of:
            self._print_of = of
            self._print = (session.database, session.charset, session.policy.replay_since(0)[0])
        return self._print

    def give_back(self, last: BackendConnection | None) -> None:
        """After a command: return the connections nothing binds the session to; ``last``,
        the one the command ran on, is kept for a follow-up statement while the pool can
        spare it."""
        policy = self._session.policy
        if policy.autocommit and not policy.in_transaction and not policy.pins:
            # The common case: only the server's status could bind (read per connection).
            bound: set[str] | None = None
        else:
            bound = set(self.pin_reasons())
        conns = self.conns
        for name, conn in list(conns.items()):
            if bound is None and conn.status & _BINDING_STATUS:
                continue
            if (bound is not None and name in bound) or conn.busy:
                continue
            pool = self._pools.get(name)
            if pool is None:
                continue
            del conns[name]
            conn.on_closed = None
            self._parked[name] = conn
            if name == PRIMARY:
                self._primary_status = conn.status
            follow = conn is last and not conn.lost
            pool.give_back(conn, state_key=self._state_key(conn), follow_up=follow)
            if follow:
                self.unreserve()
                self.follow = conn

    def unreserve(self) -> None:
        """The session no longer needs the connection kept for a follow-up."""
        follow = self.follow
        if follow is not None:
            self.follow = None
            if follow.reserved_for == self._session.id:
                follow.reserved_for = 0

    def follow_up_lost(self) -> bool:
        """The connection the previous statement ran on went to another session."""
        follow = self.follow
        return follow is not None and (follow.owner != self._session.id or follow.lost)

    def following(self) -> bool:
        """Whether a connection is kept for a follow-up statement (and still is)."""
        return self.follow is not None and not self.follow_up_lost()

    def close_statement(self, client_id: int) -> None:
        """Close prepared statement ``client_id`` wherever the session prepared it (the
        connections it holds and its idle pooled ones; COM_STMT_CLOSE has no response)."""
        own = self._session.id
        conns = list(self.conns.values())
        for pool in self._pools.values():
            conns.extend(c for c in pool.idle_connections() if c.owner == own)
        for conn in conns:
            backend_id = conn.statements.pop(client_id, None)
            conn.statement_types.pop(client_id, None)
            if backend_id is not None and not conn.closed:
                conn.write(frame_command(b"\x19" + backend_id.to_bytes(4, "little")))

    # ----------------------------------------------------------------- ready connections

    def ready_conn(self, target: str) -> BackendConnection | None:
        """``target``'s connection if it can take a statement right now (with multiplexing:
        the session's own idle one, taken back from the pool, if it is in the session's
        state)."""
        conn = self.conns.get(target)
        if conn is None:
            if not self.multiplex:
                return None
            conn = self._take_own(target)
            if conn is None:
                return None
        if conn.lost:
            return None
        session = self._session
        if target == PRIMARY:
            if self._servers[PRIMARY].refusing is not None:
                return None  # the slow path refuses
            # A primary connection of its own ran the session's state itself.
            ready = is_ready(
                session.policy, session.flavor, conn, primary=True, replay=self.multiplex
            )
        else:
            ready = is_ready(session.policy, session.flavor, conn, primary=False)
        return conn if ready else None

    def _take_own(self, target: str) -> BackendConnection | None:
        """The session's own idle connection to ``target``, borrowed again synchronously."""
        conn = self._parked.get(target)
        if conn is None or self._session.closing:
            return None  # a closing session starts nothing (a read retried after a KILL)
        pool = self._pools.get(target)
        if pool is None or not pool.take_own(self._session.id, conn):
            return None
        conn.on_closed = self._backend_closed
        self.conns[target] = conn
        return conn

    def _pool(self, target: str, credentials: Credentials) -> ConnectionPool:
        pool = self._pools.get(target)
        if pool is None:
            server = self._servers[target]
            pool = self._pools[target] = self._session.host.pool_for(server, credentials)
        return pool

    async def _borrow(self, target: str) -> BackendConnection:
        """A pooled connection to ``target``, brought to the session's state (the replay
        log and GTID tracking follow in :meth:`connect_ready`)."""
        server = self._servers.get(target)
        if server is None:
            raise BackendUnavailable(target, "not configured for this session")
        session = self._session
        credentials = self._credentials()
        pool = self._pool(target, credentials)
        schema = session.database is not None or session.schema is not None
        conn, fit = await pool.borrow(
            session.id, self._fingerprint(), lambda: server.connect(credentials), schema=schema
        )
        if session.closing:
            pool.give_back(conn, state_key=None, follow_up=False)
            raise ConnectionClosed("the session closed")
        conn.on_closed = self._backend_closed
        self.conns[target] = conn
        try:
            if fit is Fit.RESET:
                pool.resets += 1
                await self._reset_pooled(conn)
            elif fit is Fit.MATCH:
                self._close_statements(conn)
                conn.applied_seq = session.policy.replay_seq
            elif fit is Fit.FRESH:
                conn.applied_seq = 0
        except BaseException:
            if self.conns.get(target) is conn:
                del self.conns[target]
            conn.on_closed = None
            pool.discard(conn)
            raise
        if conn.owner != session.id:
            conn.spare = None  # its sink and callbacks are the previous session's
        conn.owner = session.id
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
        session = self._session
        names = charset_names(session.charset)
        if names is not None:
            statements.append(f"SET NAMES '{names[0]}' COLLATE '{names[1]}'")
        if session.database is not None:
            statements.append(quote_schema(session.database))
        for sql in statements:
            result = await conn.query(sql, timeout=10.0)
            if result.error is not None:
                raise ReplayFailed(f"{sql}: {result.error.message}")

    def _credentials(self) -> Credentials:
        session = self._session
        config = session.config
        backends = config.backends
        account = session.host.authenticator.users.get(session.user)
        user = backends.user
        password = backends.password
        if account is not None and account.backend_user is not None:
            user = account.backend_user
            password = account.backend_password or ""
        caps = session.caps
        wanted = int(BACKEND_CAPABILITIES) | (caps & int(MIRRORED_CAPABILITIES))
        if not session.local_infile:
            wanted &= ~int(Capability.LOCAL_FILES)
        if not config.backend_deprecate_eof and not caps & _DEPRECATE_EOF:
            wanted &= ~_DEPRECATE_EOF
        return Credentials(
            user=user,
            password=password,
            database=session.database,
            charset=session.charset,
            capabilities=wanted,
            mariadb_capabilities=session.mariadb_caps,
        )

    async def connect_ready(self, target: str) -> BackendConnection:
        """``target``'s connection, opened if needed and brought to the session's state."""
        if target == PRIMARY:
            refusing = self._servers[PRIMARY].refusing
            if refusing is not None:
                raise WritesRefused(PRIMARY, refusing)
        session = self._session
        policy = session.policy
        conn = self.conns.get(target)
        if (conn is None or conn.closed) and self.multiplex:
            if self.broken is not None:
                raise Broken(self.broken)
            conn = await self._borrow(target)
        elif conn is None or conn.closed:
            if self.broken is not None:
                raise Broken(self.broken)
            server = self._servers.get(target)
            if server is None:
                raise BackendUnavailable(target, "not configured for this session")
            conn = await server.connect(self._credentials())
            if session.closing:
                conn.abort()
                raise ConnectionClosed("the session closed")
            conn.on_closed = self._backend_closed
            self.conns[target] = conn
            if target == PRIMARY:
                # A first primary connection has run everything (session state goes there);
                # a reopened one gets the replayable state again.
                conn.applied_seq = 0 if self._primary_opened else policy.replay_seq
                self._primary_opened = True
        steps = ready_steps(policy, session.flavor, conn, primary=target == PRIMARY)
        value: bytes | None = None
        while True:
            try:
                step = steps.send(value)
            except StopIteration:
                return conn
            result = await conn.query(step.sql, timeout=10.0)
            value = None
            if step.kind is _PROBE:
                value = result.scalar() or b""
            elif result.error is not None:
                steps.close()
                if step.kind is _REPLAY:
                    raise ReplayFailed(f"{step.sql}: {result.error.message}")
                raise BackendUnavailable(
                    conn.address.name, f"cannot turn GTID tracking on: {result.error.message}"
                )

    def _backend_closed(self, conn: BackendConnection) -> None:
        """A backend connection ended (idle or not): forget it; losing the primary with state
        only it held breaks the session."""
        session = self._session
        session.reader.backend_closed(conn)
        if self.conns.get(conn.name) is not conn:
            return
        del self.conns[conn.name]
        if conn.name == PRIMARY and not session.closing:
            policy = session.policy
            if policy.in_transaction or policy.pins:
                why = "a transaction" if policy.in_transaction else f"state ({policy.pinned})"
                self.broken = (
                    f"Lost connection to the primary {conn.address} while the session held "
                    f"{why} there: reconnect"
                )

    async def prepare_on(self, conn: BackendConnection, ps: PreparedStatement) -> bool:
        """Prepare ``ps`` on ``conn`` (a server it was not prepared on); False if refused."""
        data = await conn.request(
            frame_command(b"\x16" + ps.sql.encode("utf-8")), ResponseKind.PREPARE, timeout=None
        )
        packet = data[4:]
        if packet[:1] != b"\x00" or len(packet) < 5:
            logger.info("session %d: preparing on %s failed", self._session.id, conn.address)
            return False
        conn.statements[ps.client_id] = int.from_bytes(packet[1:5], "little")
        pool = self._pools.get(conn.name)
        if pool is not None:
            pool.prepared_again += 1
        return True

    async def read_packet_limit(self, conn: BackendConnection) -> None:
        """Learn ``conn``'s ``max_allowed_packet`` (read-only for a session, so read once)."""
        result = await conn.query("SELECT @@max_allowed_packet", timeout=10.0)
        value = result.scalar()
        if result.error is None and value is not None and value.isdigit():
            conn.max_allowed_packet = int(value)

    # ----------------------------------------------------------------- resets and the end

    def reset(self, *, new_login: bool = False) -> None:
        """COM_RESET_CONNECTION or COM_CHANGE_USER: the session's connections keep none of
        its state (idle pooled ones are no longer its own; held ones go back or close).  A
        new login may log in to the servers as another backend account: other pools."""
        self.unreserve()
        own = self._session.id
        for shared in self._pools.values():
            for idle in shared.idle_connections():
                if idle.owner == own:
                    idle.owner = 0  # its state is no longer this session's
                    idle.state_key = None
        for conn in list(self.conns.values()):
            pool = self._pools.get(conn.name) if self.multiplex else None
            if pool is not None and not conn.busy:
                del self.conns[conn.name]
                conn.on_closed = None
                conn.owner = 0
                pool.give_back(conn, state_key=None, follow_up=False)
                continue
            self.forget(conn)
        self._primary_opened = False
        if new_login:
            self._pools.clear()
            self._parked.clear()

    async def release(self) -> None:
        """The session ended: lend back what may be lent, close the rest."""
        # What binds the session is read from its connections: before they are let go.  A
        # connection still in a transaction (or holding anything else of the session's) is
        # closed, never lent: its locks would outlive the session.
        multiplex = self.multiplex
        bound = set(self.pin_reasons()) if multiplex else set()
        conns = list(self.conns.values())
        self.conns.clear()
        quits = []
        if multiplex:
            self.unreserve()
            kept = []
            for conn in conns:
                pool = self._pools.get(conn.name)
                if (
                    pool is not None
                    and conn.name not in bound
                    and not conn.status & _BINDING_STATUS
                    and not conn.busy
                ):
                    conn.on_closed = None
                    pool.give_back(conn, state_key=self._state_key(conn), follow_up=False)
                else:
                    kept.append(conn)
            conns = kept
        for conn in conns:
            conn.on_closed = None
            if conn.busy:
                conn.abort()
            else:
                quits.append(conn.quit())
        if quits:
            await asyncio.gather(*quits, return_exceptions=True)
