"""The state every part of a client session shares, its lifecycle and its replies.

A session is assembled from three parts that work on this state, one class deriving from the
next (a single line of inheritance, which mypyc's compiled classes need):
:mod:`proxy.clientio` (the client's byte stream), :mod:`proxy.slowpath` (everything that must
await: backend connections, waits, resets) and :mod:`proxy.session` (commands, routing,
completion).  The methods each part provides to the others are declared here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Final, Protocol

from consistent.classify import FunctionRules, PinReason
from consistent.errnos import CR, ER
from consistent.errors import Error, OperationalError, RemoteProtocolError
from consistent.flavors import Flavor
from consistent.observe import Fanout, Observer
from consistent.policy import (
    PRIMARY,
    AcknowledgedWrites,
    Decision,
    Level,
    PolicyConfig,
    ReplicaKnowledge,
    SessionPolicy,
    WaitOutcome,
)
from consistent.protocol import (
    ErrPacket,
    OkPacket,
    ServerStatus,
    build_err,
    build_ok,
    parse_err,
)
from consistent.protocol.constants import Capability
from consistent.telemetry import NOOP_SPAN, StatementSpan, Telemetry
from proxy.backends import BackendConnection, BackendServer, BackendUnavailable, Credentials
from proxy.clientlogin import Authenticator
from proxy.config import ProxyConfig
from proxy.errors import PoolExhausted, WritesRefused
from proxy.metrics import ProxyMetrics
from proxy.pool import ConnectionPool, pin_reasons
from proxy.relay import QueryResult, ResponseKind, ResponseRelay
from proxy.statements import PreparedStatement, StatementRegistry
from proxy.stream import PacketEndpoint, frame, renumber
from proxy.threads import ProcessRow

__all__ = ["Broken", "ReplayFailed", "SessionBase", "SessionHost"]

logger = logging.getLogger(__name__)

#: Server status flags that bind a session to its connection (see proxy.pool.pin_reasons).
_BINDING_STATUS: Final = int(ServerStatus.IN_TRANS | ServerStatus.CURSOR_EXISTS)
_QUERY: Final = ResponseKind.QUERY


class SessionHost(Protocol):
    """What a session needs from the proxy that runs it."""

    @property
    def config(self) -> ProxyConfig: ...

    @property
    def knowledge(self) -> ReplicaKnowledge: ...

    @property
    def acknowledged(self) -> AcknowledgedWrites: ...

    @property
    def metrics(self) -> ProxyMetrics: ...

    @property
    def authenticator(self) -> Authenticator: ...

    @property
    def flavor(self) -> Flavor: ...

    @property
    def functions(self) -> FunctionRules: ...

    @property
    def telemetry(self) -> Telemetry: ...

    def servers(self) -> Mapping[str, BackendServer]: ...

    @property
    def sessions(self) -> Mapping[int, SessionBase]: ...

    def pool_for(self, server: BackendServer, credentials: Credentials) -> ConnectionPool:
        """The pool of ``server``'s connections for ``credentials``' login (shared)."""
        ...


class ReplayFailed(Exception):
    """Session state could not be replayed on a replica connection."""


class Broken(Exception):
    """The session cannot go on (primary lost with state only it had)."""


class SessionBase:
    """One authenticated client's state (see the module docstring)."""

    def __init__(
        self,
        host: SessionHost,
        client: PacketEndpoint,
        *,
        connection_id: int,
        user: str,
        level: Level | None,
        capabilities: int,
        charset: int,
        database: str | None,
        nonce: bytes,
        peer: str,
        tls: bool,
        peer_port: int = 0,
        mariadb_capabilities: int = 0,
    ) -> None:
        config = host.config
        self._host = host
        self._config = config
        self._servers = dict(host.servers())
        self._flavor = host.flavor
        self._mariadb = self._flavor.name == "mariadb"
        # Which function calls a replica may run (the configuration's declared functions and
        # the servers' family), for every statement this session classifies.
        self._functions = host.functions
        self._metrics = host.metrics
        self._tally = self._metrics.tally()
        self.id = connection_id
        self.client = client
        self.user = user
        self.peer = peer
        self.peer_port = peer_port
        self.tls = tls
        self.caps = capabilities
        #: MariaDB extended capabilities the client negotiated (bulk execution).
        self.mariadb_caps = mariadb_capabilities
        self.charset = charset
        self.database = database
        self._schema = database
        self._nonce = nonce
        self.started_at = time.time()
        #: When the last command began (``time.monotonic()``), for SHOW PROCESSLIST.
        self.command_at = time.monotonic()
        self.policy = SessionPolicy(
            replicas=config.backends.replica_names,
            knowledge=host.knowledge,
            acknowledged=host.acknowledged,
            flavor="mariadb" if self._mariadb else "mysql",
            config=PolicyConfig(
                level=level or config.level,
                wait_timeout=config.wait_timeout,
                on_timeout=config.on_timeout,
            ),
        )
        self._user_level = level
        #: The backend connections the session holds now (with multiplexing: borrowed from
        #: the shared pools for a statement, or while something binds the session to them).
        self._conns: dict[str, BackendConnection] = {}
        self._multiplex = config.pool.multiplexing
        self._pools: dict[str, ConnectionPool] = {}
        #: The connection given back with the last statement's after-effects
        #: (``LAST_INSERT_ID()``…), kept for a follow-up statement unless the pool needs it.
        self._follow: BackendConnection | None = None
        #: The last non-zero ``last_insert_id`` of the OK packets the session's statements got
        #: (what it answers to ``SELECT LAST_INSERT_ID()`` when multiplexing).
        self.last_insert_id = 0
        #: The connection last given back, per server (taken back on the fast path if it is
        #: still idle and in this session's state).
        self._parked: dict[str, BackendConnection] = {}
        # The fingerprint of the session's state, cached with what it was computed from.
        self._print: object = None
        self._print_of: tuple[int, str | None, int] = (-1, None, 0)
        #: The primary's status flags at its last answer (NO_BACKSLASH_ESCAPES, for the
        #: proxy's own statement parsing, when no primary connection is held).
        self.primary_status = 0
        self._primary_opened = False
        self._statements = StatementRegistry()
        self._local_infile = config.local_infile and bool(capabilities & Capability.LOCAL_FILES)
        self._write: Callable[[bytes | bytearray | memoryview], None] = client.write
        # Client input.
        self._cbuf = bytearray()
        self._paused_reading = False
        self._infile: BackendConnection | None = None
        self._infile_cont = False
        # A streamed command (see proxy.clientio): the packet being passed on as it arrives.
        self._streaming = False
        self._stream_left = 0  # bytes of the current physical packet still to come
        self._stream_more = False  # a 16 MiB piece: another physical packet follows
        self._stream_seq = 0  # sequence id of the next physical packet
        self._stream_size = 0  # payload bytes announced so far
        self._stream_to: BackendConnection | None = None
        self._stream_drop = False  # answered without a server: the rest is dropped
        self._stream_blocked = False  # the backend's write buffer is full
        self._gate: bytearray | None = None  # what the client gets once the command is in
        self._done_deferred = False
        # The command being served.
        self._busy = False
        self._raw = b""
        self._payload = b""
        self._reply_seq = 1
        self._kind = _QUERY
        self._decision: Decision | None = None
        self._target = PRIMARY
        self._conn: BackendConnection | None = None
        self._relay: ResponseRelay | None = None
        self._ps: PreparedStatement | None = None
        self._post: Callable[[ResponseRelay], None] | None = None
        self._wait_started = 0.0
        # Lifecycle.
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self._draining = False
        self._broken: str | None = None
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Observability.
        self.statements = 0
        self._last: Decision | None = None
        # Tracing: one span per routed statement (the shared no-op span when tracing is off).
        primary = config.backends.primary
        self._tracer = host.telemetry.session(
            system=self._flavor.name,
            addresses={PRIMARY: (primary.host, primary.port)},
            session_id=f"proxy-{connection_id}-{int(self.started_at * 1000)}",
        )
        self._tracing = self._tracer.enabled
        self._tracer.set_namespace(self._schema)
        self._span: StatementSpan = NOOP_SPAN
        # Each event of a statement is reported once, to ``_observer``: the metrics, and
        # with tracing the statement's span too (swapped into ``_events`` per statement).
        self._events = Fanout(NOOP_SPAN, self._metrics)
        self._observer: Observer = self._events if self._tracing else self._metrics
        #: Required GTIDs a failover lost (the primary the session follows never had them).
        self._lost_gtids: str | None = None
        # Bound once: every command hands them to a relay.
        self._done_cb = self._on_response
        self._lost_cb = self._on_response_lost
        self._infile_cb = self._on_infile

    def start(self) -> None:
        """Enter the command phase."""
        self.client.on_lost = self._on_client_lost
        self.client.on_write_paused = self._client_write_paused
        self.client.stream(self._on_client_data)

    @property
    def busy(self) -> bool:
        return self._busy

    def backend_thread(self, server: str) -> int | None:
        """The server's thread id of this session's connection to ``server``, if open."""
        conn = self._conns.get(server)
        return conn.thread_id if conn is not None and not conn.closed else None

    def owns_thread(self, server: str, thread_id: int) -> bool:
        """Whether server thread ``thread_id`` of ``server`` is this session's: the
        connection it holds, or (multiplexing) an idle pooled one still in its state."""
        if self.backend_thread(server) == thread_id:
            return True
        pool = self._pools.get(server)
        if pool is None:
            return False
        return any(
            c.owner == self.id and c.thread_id == thread_id and not c.closed
            for c in pool.idle_connections()
        )

    def process_row(self) -> ProcessRow:
        """This session as ``SHOW PROCESSLIST`` lists it."""
        busy = self._busy
        info: str | None = None
        payload = self._payload
        if busy and payload[:1] == b"\x03":
            info = payload[1:].decode("utf-8", "replace")
        return ProcessRow(
            id=self.id,
            user=self.user,
            host=f"{self.peer}:{self.peer_port}" if self.peer_port else self.peer,
            db=self._schema,
            command="Query" if busy else "Sleep",
            time=int(time.monotonic() - self.command_at),
            state=self._target if busy and self._relay is not None else "",
            info=info,
        )

    def running_threads(self) -> list[tuple[str, int]]:
        """``(server, thread id)`` of the backend connections running something for this
        session now: what ``KILL QUERY`` of this session interrupts."""
        return [(c.name, c.thread_id) for c in self._conns.values() if c.busy and not c.closed]

    def close(self, reason: str = "") -> None:
        """Close the client connection (after what was written is sent); the session's
        backend connections close with it."""
        if reason:
            logger.info("closing session %d: %s", self.id, reason)
        self._closing = True
        gate = self._gate
        if gate:  # a streamed command's answer, numbered as if the command had ended here
            self._gate = None
            self._write = self.client.write
            self.client.write(renumber(gate, self._stream_seq)[0])
        self.client.close()

    def drain(self) -> None:
        """Graceful shutdown: close now if idle outside a transaction, else once the
        current command (or transaction) ends."""
        self._draining = True
        if not self._busy and not self.policy.in_transaction:
            self.close("shutdown")

    def abort(self) -> None:
        """Close everything now."""
        self._closing = True
        self.client.abort()

    async def wait_closed(self) -> None:
        """Wait until the session ended and its resources are released."""
        await asyncio.shield(self._closed)

    def _on_client_lost(self, _exc: BaseException | None) -> None:
        self._closing = True
        for task in self._tasks:
            task.cancel()
        task = asyncio.get_running_loop().create_task(self._release())
        task.add_done_callback(self._released)

    async def _release(self) -> None:
        tasks = list(self._tasks)
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        # What binds the session is read from its connections: before they are let go.  A
        # connection still in a transaction (or holding anything else of the session's) is
        # closed, never lent: its locks would outlive the session.
        bound = self._bound_servers() if self._multiplex else set()
        conns = list(self._conns.values())
        self._conns.clear()
        quits = []
        if self._multiplex:
            self._unreserve()
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

    def _released(self, task: asyncio.Task[None]) -> None:
        self._metrics.retire(self._tally)
        if not task.cancelled() and task.exception() is not None:
            logger.error("releasing session %d failed", self.id, exc_info=task.exception())
        if not self._closed.done():
            self._closed.set_result(None)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("session %d task failed", self.id, exc_info=task.exception())
            self.abort()

    def _done(self) -> None:
        """The current command is finished; serve what the client sent meanwhile.  A
        streamed command finishes once all of it has arrived (the rest of one answered
        without a server is dropped)."""
        if self._streaming:
            self._done_deferred = True
            if self._stream_to is None and not self._stream_drop:
                self._stream_drop = True
                if self._cbuf:
                    self._pump()
            return
        span = self._span
        if span is not NOOP_SPAN:
            if self._multiplex and self._conns:
                bound = self.pin_reasons()
                if bound:
                    reasons = ",".join(dict.fromkeys(r for rs in bound.values() for r in rs))
                    self._observer.pin(reasons)
            self._span = self._events.first = NOOP_SPAN
            span.__exit__(None, None, None)
        self._busy = False
        self._relay = None
        self._decision = None
        self._ps = None
        if self._multiplex and self._conns:
            self._give_back()
        if self._draining and not self.policy.in_transaction:
            self.close("shutdown")
            return
        if self._cbuf:
            self._pump()

    # ----------------------------------------------------------------- pooled connections

    def pin_reasons(self) -> dict[str, list[str]]:
        """Why the session holds each of its connections now (server -> reasons)."""
        policy = self.policy
        txn = policy.transaction
        found: dict[str, list[str]] = {}
        pins = policy.pins
        if not policy.autocommit:
            # Every statement opens a transaction the server keeps until COMMIT.
            pins = (*pins, PinReason.AUTOCOMMIT_OFF)
        for name, conn in self._conns.items():
            reasons = pin_reasons(
                pins if name == PRIMARY else (),
                in_transaction=txn is not None and txn.server == name,
                status=conn.status,
            )
            if reasons:
                found[name] = reasons
        return found

    def _bound_servers(self) -> set[str]:
        """The servers whose connection the session cannot give back now."""
        return set(self.pin_reasons())

    def _state_key(self, conn: BackendConnection) -> object:
        """The fingerprint of the state ``conn`` holds for this session (``None`` when it
        is behind the session's log: the next session resets it)."""
        policy = self.policy
        if conn.applied_seq < policy.replay_seq:
            return None
        return self._fingerprint()

    def _fingerprint(self) -> object:
        """The session's state as a value: login schema and character set, replay log."""
        of = (self.policy.replay_seq, self.database, self.charset)
        if of != self._print_of:
            self._print_of = of
            self._print = (self.database, self.charset, self.policy.replay_since(0)[0])
        return self._print

    def _give_back(self) -> None:
        """After a command: return the connections nothing binds the session to; the one
        the command ran on is kept for a follow-up statement while the pool can spare it."""
        policy = self.policy
        if policy.autocommit and not policy.in_transaction and not policy.pins:
            # The common case: only the server's status could bind (read per connection).
            bound: set[str] | None = None
        else:
            bound = self._bound_servers()
        last = self._conn
        for name, conn in list(self._conns.items()):
            if bound is None and conn.status & _BINDING_STATUS:
                continue
            if (bound is not None and name in bound) or conn.busy:
                continue
            pool = self._pools.get(name)
            if pool is None:
                continue
            del self._conns[name]
            conn.on_closed = None
            self._parked[name] = conn
            if name == PRIMARY:
                self.primary_status = conn.status
            follow = conn is last and not conn.lost
            pool.give_back(conn, state_key=self._state_key(conn), follow_up=follow)
            if follow:
                self._unreserve()
                self._follow = conn
        self._conn = None

    def primary_moved(self, server: BackendServer) -> None:
        """Role discovery made ``server`` the primary: the session's statements go there from
        now on.  Its connection to the old primary is closed at once: a statement running
        there gets a lost-connection error (and is never sent again elsewhere), and a session
        that held a transaction or other state there is broken at its next statement, as when
        the primary is lost."""
        if self._servers.get(PRIMARY) is server:
            return
        self._servers[PRIMARY] = server
        self._tracer.set_address(PRIMARY, (server.address.host, server.address.port))
        self._pools.pop(PRIMARY, None)
        self._parked.pop(PRIMARY, None)
        conn = self._conns.get(PRIMARY)
        if conn is not None:
            conn.abort()

    def check_lost(self, flavor: Flavor, primary: str, row: Sequence[object]) -> bool:
        """The new primary ``primary`` answered ``row`` to the flavour's history statement:
        True (and the session's spans name them from now on) when it never had GTIDs this
        session required, which a failover lost.  Reads are not refused: no server will
        ever have them."""
        missing = flavor.missing_gtids(self.policy.required, row)
        if missing is None:
            return False
        self._lost_gtids = missing
        logger.error(
            "session %d required %s, which the new primary %s never had: a failover lost "
            "these writes (its spans say so in consistent.gtid.lost)",
            self.id,
            missing,
            primary,
        )
        return True

    def _unreserve(self) -> None:
        """The session no longer needs the connection kept for a follow-up."""
        follow = self._follow
        if follow is not None:
            self._follow = None
            if follow.reserved_for == self.id:
                follow.reserved_for = 0

    def _follow_up_lost(self) -> bool:
        """The connection the previous statement ran on went to another session."""
        follow = self._follow
        return follow is not None and (follow.owner != self.id or follow.lost)

    def _span_error(self, payload: bytes) -> None:
        try:
            err = parse_err(payload, self.caps)
        except RemoteProtocolError:
            return
        self._observer.fail(OperationalError(err.errno, err.message, sqlstate=err.sqlstate))

    def _forget(self, conn: BackendConnection) -> None:
        if self._conns.get(conn.name) is conn:
            del self._conns[conn.name]
        conn.abort()

    def _guarded(self, fn: Callable[..., None], *args: Any) -> None:
        """Run a callback from a backend's ``data_received``: a failure ends this command
        with an error instead of breaking the backend connection's loop."""
        try:
            fn(*args)
        except Exception:
            logger.exception("session %d: response handling failed", self.id)
            self._fail_command(ER.UNKNOWN_ERROR, "HY000", "internal proxy error")

    # ----------------------------------------------------------------- commands without policy

    def _account(self, d: Decision) -> None:
        self.statements += 1
        self._last = d
        self._tally.add(d.target, d.reason)

    @property
    def last_target(self) -> str | None:
        """Where the last routed statement went."""
        return self._last.target if self._last is not None else None

    @property
    def last_reason(self) -> str | None:
        """Why, as traces show it (``pinned(temporary_table)``)."""
        return self._last.reason_text if self._last is not None else None

    def _status(self) -> ServerStatus:
        policy = self.policy
        status = ServerStatus.AUTOCOMMIT if policy.autocommit else ServerStatus(0)
        txn = policy.transaction
        if txn is not None:
            status |= ServerStatus.IN_TRANS
            if txn.read_only:
                status |= ServerStatus.IN_TRANS_READONLY
        return status

    def _reply_ok(self) -> None:
        self._write(frame(build_ok(OkPacket(status=self._status()), self.caps), self._reply_seq))
        self._done()

    def _reply_err(self, errno: int, sqlstate: str | None, message: str, seq: int) -> None:
        self._write(frame(build_err(ErrPacket(errno, sqlstate, message), self.caps), seq))
        if self._span is not NOOP_SPAN:
            self._observer.fail(OperationalError(errno, message, sqlstate=sqlstate))
        self._done()

    def _reply_error(self, error: Error | None) -> None:
        if error is None:
            self._reply_err(ER.UNKNOWN_ERROR, "HY000", "unknown error", self._reply_seq)
            return
        self._reply_err(
            error.errno or ER.UNKNOWN_ERROR, error.sqlstate or "HY000", error.msg, self._reply_seq
        )

    def _fail_command(self, errno: int, sqlstate: str, message: str) -> None:
        """End the current command with an ERR, whatever state it was in."""
        relay = self._relay
        if relay is not None and relay.mid_packet:
            self.abort()
            return
        seq = (
            relay.fail_seq(self._reply_seq - 1)
            if relay is not None and relay.wrote
            else (self._reply_seq)
        )
        conn = self._conn
        if relay is not None and conn is not None and not relay.done:
            self._forget(conn)  # its stream position is unknown
        self._reply_err(errno, sqlstate, message, seq)

    def _unavailable(self, e: BackendUnavailable) -> None:
        if isinstance(e, PoolExhausted):
            self._reply_err(ER.CON_COUNT_ERROR, "08004", e.reason, self._reply_seq)
            return
        if isinstance(e, WritesRefused):
            self._reply_err(ER.OPTION_PREVENTS_STATEMENT, "HY000", e.reason, self._reply_seq)
            return
        login = e.login_error
        if login is not None and login.errno is not None:
            self._reply_err(login.errno, login.sqlstate or "HY000", login.msg, self._reply_seq)
            return
        self._reply_err(
            CR.CONN_HOST_ERROR, "HY000", f"Can't connect to {e.server}: {e.reason}", self._reply_seq
        )

    def _broken_now(self, message: str) -> None:
        self._reply_err(CR.SERVER_LOST, "HY000", message, self._reply_seq)
        self.close(message)

    # ----------------------------------------------------------------- defined by Session

    def _command(self, raw: bytes, payload: bytes, reply_seq: int) -> None:
        raise NotImplementedError

    def _execute(self, d: Decision) -> None:
        raise NotImplementedError

    def _send(self, conn: BackendConnection, d: Decision | None) -> None:
        raise NotImplementedError

    def _send_direct(self, conn: BackendConnection, client_stmt_id: int | None) -> None:
        raise NotImplementedError

    def _send_pipelined(self, conn: BackendConnection, d: Decision) -> None:
        raise NotImplementedError

    def _pipelinable(self, d: Decision) -> bool:
        raise NotImplementedError

    def _wait_outcome(self, result: QueryResult) -> WaitOutcome:
        raise NotImplementedError

    # ------------------------------------------------------------ defined by the other parts

    def _pump(self) -> None:
        raise NotImplementedError

    def _on_client_data(self, data: bytes) -> None:
        raise NotImplementedError

    def _client_write_paused(self, paused: bool) -> None:
        raise NotImplementedError

    def _on_infile(self, relay: ResponseRelay) -> None:
        raise NotImplementedError

    def _ready_conn(self, target: str) -> BackendConnection | None:
        raise NotImplementedError

    def _on_response(self, relay: ResponseRelay) -> None:
        raise NotImplementedError

    def _on_response_lost(self, relay: ResponseRelay, exc: BaseException | None) -> None:
        raise NotImplementedError
