"""One client session: commands in, routed by the policy, responses relayed back.

The session drives :class:`~consistent.policy.SessionPolicy` exactly as its docstring says
(route, then fetch/wait/execute, then report success or error) and re-implements none of it.

Two paths serve a command:

* the *fast path*, synchronous in the client's ``data_received``: the policy names a server
  whose connection is open and in the session's state, the command bytes are written to it, and
  the backend's ``data_received`` relays the response and reports completion — no task switch,
  no copy of row data;
* the *slow path*, a task, for everything that must wait: opening a backend connection,
  replaying session state on it, waits that cannot be pipelined, reading the primary's executed
  state, preludes, preparing a statement on a replica, resets.

A wait on a replica is pipelined with the read when that is safe (a replica-safe read outside a
transaction, on a connection already in the session's state): both go in one write; the wait's
answer, processed before the first byte of the read's, decides whether the read's response goes
to the client or is discarded (timeout: the policy then names the fallback).

Commands are served one at a time; whatever the client sends meanwhile is buffered (bounded:
reading from the client pauses), except the file a LOCAL INFILE request asked for, which flows to
the backend as it arrives.

Failure rules (a backend silent past its deadline counts as dead, see :mod:`proxy.backends`): a
read whose replica dies before any byte reached the client is retried where the policy says
(once); a replica dying mid-response gives the client ERR 2013 and the session goes on;
the primary dying with a command in flight gives ERR 2013 and closes the session (nothing sent
to the primary is ever replayed).  A primary connection lost while idle is reopened
transparently unless the session had state only it held (a transaction, a pin), in which case
the next command gets ERR 2013 and the session closes.  A malformed client packet closes this
client only.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Final, TypeGuard

from consistent.classify import (
    Classification,
    PrimaryReason,
    StatementKind,
    classify,
    classify_head,
)
from consistent.errnos import CR, ER
from consistent.errors import (
    ER_MALFORMED_GTID_SET_SPECIFICATION,
    Error,
    MalformedGtidSet,
    RemoteProtocolError,
)
from consistent.policy import (
    PRIMARY,
    Action,
    Decision,
    Level,
    WaitOutcome,
    wait_outcome,
)
from consistent.policy.deadlines import wait_deadline
from consistent.protocol import (
    ServerStatus,
    parse_ok,
)
from consistent.protocol.constants import (
    MAX_PACKET_PAYLOAD,
    Command,
    MariaDbCapability,
)
from proxy.backends import BackendConnection
from proxy.intercept import (
    NOT_FIXED_DEC_MARIADB,
    NOT_FIXED_DEC_MYSQL,
    Intercept,
    mentions_variable,
    parse_intercept,
    result_set,
)
from proxy.relay import QueryResult, ResponseKind, ResponseRelay, discard, parse_response
from proxy.sessionbase import (
    SessionHost,
)
from proxy.slowpath import SlowPath
from proxy.statements import LAST_PREPARED, PreparedStatement, bulk_packets, execute_packets
from proxy.stream import frame_command
from proxy.threads import (
    THREAD_REASONS,
    ConnectionIdQuery,
    Kill,
    ProcessList,
    ThreadStatement,
    connection_id_result,
    kill_in_prepare,
    last_insert_id_result,
    parse_last_insert_id,
    parse_thread_statement,
    processlist_result,
)

__all__ = ["Session", "SessionHost"]

logger = logging.getLogger(__name__)

_EXECUTE: Final = Action.EXECUTE
_EXECUTE_KIND: Final = ResponseKind.EXECUTE
_FIELD_LIST_STATEMENT: Final = classify("SHOW COLUMNS FROM t")
_IN_TRANS: Final = int(ServerStatus.IN_TRANS)
_NO_BACKSLASH_ESCAPES: Final = int(ServerStatus.NO_BACKSLASH_ESCAPES)
_BULK: Final = int(Command.STMT_BULK_EXECUTE)
#: A command this long on the wire came in several packets (a 16 MiB one and more).
_SEVERAL_PACKETS: Final = MAX_PACKET_PAYLOAD + 4
_BULK_OPERATIONS: Final = int(MariaDbCapability.STMT_BULK_OPERATIONS)
_MAY_INTERCEPT: Final = (b"S", b"s")
_PIPELINABLE: Final = frozenset({ResponseKind.QUERY, ResponseKind.EXECUTE, ResponseKind.FIELD_LIST})
_QUERY: Final = ResponseKind.QUERY
_SESSION_STATE: Final = StatementKind.SESSION_STATE


class Session(SlowPath):
    """One authenticated client (see the module docstring)."""

    def _command(self, raw: bytes, payload: bytes, reply_seq: int) -> None:
        if self._broken is not None:
            self._reply_err(CR.SERVER_LOST, "HY000", self._broken, reply_seq)
            self.close(self._broken)
            return
        self._raw = raw
        self._payload = payload
        self._reply_seq = reply_seq
        self._ps = None
        self._post = None
        self.command_at = time.monotonic()
        handler = _COMMANDS.get(payload[0]) if payload else None
        try:
            if handler is None:
                self._reply_err(
                    ER.UNKNOWN_COM_ERROR,
                    "08S01",
                    "Unknown command" if not payload else "Command not supported by the proxy",
                    reply_seq,
                )
                return
            handler(self, payload)
        except RemoteProtocolError as e:
            self._protocol_error(ER.MALFORMED_PACKET, "HY000", f"Malformed packet: {e}", reply_seq)
        except Exception:
            logger.exception("session %d: command 0x%02x failed", self.id, payload[0])
            self._fail_command(ER.UNKNOWN_ERROR, "HY000", "internal proxy error")

    def _cmd_query(self, payload: bytes) -> None:
        sql = payload[1:]
        streamed = self._streaming
        first = sql[:16].lstrip()[:1]
        if first in _MAY_INTERCEPT and mentions_variable(sql):
            found = parse_intercept(
                sql,
                length=self._stream_size - 1 if streamed else None,
                backslash_escapes=self._backslash_escapes(),
            )
            if found is not None:
                self._intercept(found)
                return
        text = sql.decode("utf-8", "surrogateescape")
        stmt = classify_head(text, self._functions) if streamed else classify(text, self._functions)
        if streamed and stmt.first_keyword == "KILL":
            # Its end is not here yet, so what it names cannot be read: no KILL reaches a
            # server as written.
            self._reply_err(
                ER.PARSE_ERROR,
                "42000",
                f"You have an error in your SQL syntax: a KILL statement of "
                f"{self._stream_size - 1} bytes",
                self._reply_seq,
            )
            return
        if stmt.primary_reason in THREAD_REASONS:
            answered = parse_thread_statement(stmt, text)
            if answered is not None:
                self._thread_statement(answered)
                return
        if stmt.primary_reason == PrimaryReason.LAST_INSERT_ID and self._multiplex:
            column = parse_last_insert_id(text)
            if column is not None:
                # The session's own last insert, as the server would answer it, whichever
                # pooled connection the session would read (see the README's Multiplexing).
                self._busy = True
                self._write(
                    last_insert_id_result(
                        column, self.last_insert_id, self.caps, self._status(), self._reply_seq
                    )
                )
                self._done()
                return
        if (
            stmt.is_multi_statement
            and not stmt.must_use_primary
            and self._config.multi_statements_to_primary
        ):
            stmt = dataclasses.replace(
                stmt, must_use_primary=True, primary_reason="multi_statement"
            )
        self._kind = _QUERY
        self._route(stmt, text)

    def _thread_statement(self, found: ThreadStatement) -> None:
        """KILL, CONNECTION_ID() and SHOW PROCESSLIST, answered by the proxy (see
        :mod:`proxy.threads`)."""
        if isinstance(found, Kill):
            self._busy = True
            self._spawn(self._kill(found))
        elif isinstance(found, ConnectionIdQuery):
            self._busy = True
            self._write(
                connection_id_result(
                    found.column, self.id, self.caps, self._status(), self._reply_seq
                )
            )
            self._done()
        elif isinstance(found, ProcessList):
            self._busy = True
            rows = [s.process_row() for s in self._host.sessions.values() if s.user == self.user]
            rows.sort(key=lambda row: row.id)
            self._write(
                processlist_result(
                    rows,
                    full=found.full,
                    mariadb=self._mariadb,
                    capabilities=self.caps,
                    status=self._status(),
                    seq=self._reply_seq,
                )
            )
            self._done()
        else:
            server = "MariaDB" if self._mariadb else "MySQL"
            self._reply_err(
                ER.NOT_SUPPORTED_YET,
                "42000",
                f"This version of {server} doesn't yet support '{found.what}'",
                self._reply_seq,
            )

    def _backslash_escapes(self) -> bool:
        """False when the session's server says ``NO_BACKSLASH_ESCAPES`` is on."""
        conn = self._conns.get(PRIMARY)
        if conn is None:
            return not self.primary_status & _NO_BACKSLASH_ESCAPES
        return not conn.status & _NO_BACKSLASH_ESCAPES

    def _cmd_init_db(self, payload: bytes) -> None:
        schema = payload[1:].decode("utf-8", "surrogateescape")

        def record(relay: ResponseRelay) -> None:
            if relay.error is None:
                self.policy.record_schema(schema)
                conn = self._conn
                if conn is not None and self._multiplex:
                    conn.applied_seq = self.policy.replay_seq
                self._schema = schema
                self._tracer.set_namespace(schema)

        self._direct(PRIMARY, ResponseKind.SIMPLE, record)

    def _cmd_ping(self, _payload: bytes) -> None:
        if self._ready_conn(PRIMARY) is not None:
            self._direct(PRIMARY, ResponseKind.SIMPLE)
        else:
            self._reply_ok()

    def _cmd_quit(self, _payload: bytes) -> None:
        self.close()

    def _cmd_simple_primary(self, _payload: bytes) -> None:
        self._direct(PRIMARY, ResponseKind.SIMPLE)

    def _cmd_field_list(self, _payload: bytes) -> None:
        self._kind = ResponseKind.FIELD_LIST
        self._route(_FIELD_LIST_STATEMENT, "")

    def _cmd_prepare(self, payload: bytes) -> None:
        sql = payload[1:].decode("utf-8", "surrogateescape")
        stmt = classify(sql, self._functions)
        if kill_in_prepare(stmt):
            self._reply_err(
                ER.UNSUPPORTED_PS,
                "HY000",
                "This command is not supported in the prepared statement protocol yet",
                self._reply_seq,
            )
            return
        client_id = self._statements.new_id()
        self._statements.last = None  # until this one succeeds
        if stmt.is_multi_statement and not stmt.must_use_primary:
            stmt = dataclasses.replace(
                stmt, must_use_primary=True, primary_reason="multi_statement"
            )

        def register(relay: ResponseRelay) -> None:
            conn = self._conn
            if relay.error is not None or relay.prepared is None or conn is None:
                return
            backend_id, columns, params = relay.prepared
            self._statements.add(PreparedStatement(client_id, sql, stmt, params, columns))
            conn.statements[client_id] = backend_id

        self._direct(PRIMARY, ResponseKind.PREPARE, register, client_stmt_id=client_id)

    def _statement(self, payload: bytes, command: str) -> PreparedStatement | None:
        if len(payload) < 5:
            raise RemoteProtocolError(f"{command} is too short")
        client_id = int.from_bytes(payload[1:5], "little")
        ps = self._statements.get(client_id)
        if ps is None:
            self._reply_err(
                ER.UNKNOWN_STMT_HANDLER,
                "HY000",
                f"Unknown prepared statement handler ({client_id}) given to {command}",
                self._reply_seq,
            )
        return ps

    def _cmd_execute(self, payload: bytes) -> None:
        if len(payload) < 10:
            raise RemoteProtocolError("COM_STMT_EXECUTE is too short")
        client_id = int.from_bytes(payload[1:5], "little")
        statements = self._statements
        ps = (
            statements.get(client_id)
            if client_id != LAST_PREPARED
            else statements.resolve(client_id)
        )
        if ps is None:
            self._statement(payload, "mysqld_stmt_execute")  # answers the error
            return
        if ps.num_params:
            ps.note_execute(payload)
        if ps.long_data_overflow:
            ps.reset_long_data()
            self._reply_err(
                ER.NET_PACKET_TOO_LARGE,
                "08S01",
                "Parameter data sent with COM_STMT_SEND_LONG_DATA exceeds max_allowed_packet",
                self._reply_seq,
            )
            return
        self._ps = ps
        self._kind = _EXECUTE_KIND
        self._route(ps.classification, ps.sql)

    def _cmd_bulk_execute(self, payload: bytes) -> None:
        """MariaDB's COM_STMT_BULK_EXECUTE: many rows of parameters in one command, for a
        client that negotiated bulk operations; a write, so it goes to the primary."""
        if not self.mariadb_caps & _BULK_OPERATIONS:
            self._reply_err(ER.UNKNOWN_COM_ERROR, "08S01", "Unknown command", self._reply_seq)
            return
        if len(payload) < 7:
            raise RemoteProtocolError("COM_STMT_BULK_EXECUTE is too short")
        client_id = int.from_bytes(payload[1:5], "little")
        ps = self._statements.resolve(client_id)
        if ps is None:
            self._reply_err(
                ER.UNKNOWN_STMT_HANDLER,
                "HY000",
                f"Unknown prepared statement handler ({client_id}) given to "
                "mysqld_stmt_bulk_execute",
                self._reply_seq,
            )
            return
        stmt = ps.bulk
        if stmt is None:
            stmt = ps.bulk = dataclasses.replace(
                ps.classification,
                must_use_primary=True,
                primary_reason=ps.classification.primary_reason or PrimaryReason.WRITE,
            )
        self._ps = ps
        self._kind = _EXECUTE_KIND
        self._route(stmt, ps.sql)

    def _cmd_long_data(self, payload: bytes) -> None:
        if len(payload) < 7:
            raise RemoteProtocolError("COM_STMT_SEND_LONG_DATA is too short")
        ps = self._statements.get(int.from_bytes(payload[1:5], "little"))
        if ps is not None:  # mysqld ignores unknown ids here: there is no response
            ps.add_long_data(payload, self._config.max_allowed_packet)

    def _cmd_close_statement(self, payload: bytes) -> None:
        if len(payload) < 5:
            raise RemoteProtocolError("COM_STMT_CLOSE is too short")
        client_id = int.from_bytes(payload[1:5], "little")
        self._statements.remove(client_id)
        conns = list(self._conns.values())
        for pool in self._pools.values():
            conns.extend(c for c in pool.idle_connections() if c.owner == self.id)
        for conn in conns:
            backend_id = conn.statements.pop(client_id, None)
            conn.statement_types.pop(client_id, None)
            if backend_id is not None and not conn.closed:
                conn.write(frame_command(b"\x19" + backend_id.to_bytes(4, "little")))

    def _cmd_reset_statement(self, payload: bytes) -> None:
        ps = self._statement(payload, "mysqld_stmt_reset")
        if ps is None:
            return
        ps.reset_long_data()
        conn = ps.last_conn
        if not self._holds(conn) or ps.client_id not in conn.statements:
            self._reply_ok()
            return
        wire = frame_command(b"\x1a" + conn.statements[ps.client_id].to_bytes(4, "little"))
        self._direct_on(conn, ResponseKind.SIMPLE, wire)

    def _cmd_fetch(self, payload: bytes) -> None:
        ps = self._statement(payload, "mysqld_stmt_fetch")
        if ps is None:
            return
        conn = ps.last_conn
        if not self._holds(conn) or ps.client_id not in conn.statements:
            self._reply_err(
                ER.STMT_HAS_NO_OPEN_CURSOR,
                "HY000",
                f"The statement ({ps.client_id}) has no open cursor.",
                self._reply_seq,
            )
            return
        body = payload[:1] + conn.statements[ps.client_id].to_bytes(4, "little") + payload[5:]
        self._direct_on(conn, ResponseKind.FETCH, frame_command(body))

    def _holds(self, conn: BackendConnection | None) -> TypeGuard[BackendConnection]:
        """Whether ``conn`` is open and the session's (not given back to a pool)."""
        if conn is None or conn.closed:
            return False
        return not self._multiplex or self._conns.get(conn.name) is conn

    def _cmd_reset_connection(self, _payload: bytes) -> None:
        self._busy = True
        self._spawn(self._reset_connection())

    def _cmd_change_user(self, payload: bytes) -> None:
        self._busy = True
        self._spawn(self._change_user(payload))

    def _cmd_process_kill(self, payload: bytes) -> None:
        if len(payload) < 5:
            raise RemoteProtocolError("COM_PROCESS_KILL is too short")
        self._busy = True
        self._spawn(self._kill(Kill(int.from_bytes(payload[1:5], "little"), query_only=False)))

    def _route(self, stmt: Classification, text: str) -> None:
        self._busy = True
        if self._follow is not None:
            if not stmt.follows_previous:
                self._unreserve()
            elif self._follow_up_lost():
                self._reply_err(
                    ER.UNKNOWN_ERROR,
                    "HY000",
                    "The previous statement's connection went to another session (the "
                    "backend pool was exhausted): its diagnostics are no longer available",
                    self._reply_seq,
                )
                return
        if self._tracing:
            span = self._tracer.statement(text)
            span.__enter__()
            self._span = self._events.first = span
            if self._lost_gtids is not None:
                self._observer.lost(self._lost_gtids)
        self._execute(self.policy.route(stmt, text))

    def _execute(self, d: Decision) -> None:
        """Act on a decision: on the fast path when possible, else in a task."""
        if self._tracing:
            self._observer.decision(d)
        action = d.action
        if action is _EXECUTE and self._streaming:
            pass  # the slow path reads the server's packet limit first
        elif action is _EXECUTE:
            if not d.prelude:
                conn = self._ready_conn(d.target)
                if conn is not None and (self._ps is None or self._ps.client_id in conn.statements):
                    self._send(conn, d)
                    return
        elif action is Action.WAIT:
            if self._pipelinable(d):
                conn = self._ready_conn(d.target)
                if conn is not None and (self._ps is None or self._ps.client_id in conn.statements):
                    self._send_pipelined(conn, d)
                    return
        elif action is Action.DEFER:
            self._account(d)
            self._reply_ok()
            return
        elif action is Action.FAIL:
            self._account(d)
            self._reply_error(d.error)
            return
        self._spawn(self._slow(d))

    def _wire(self, conn: BackendConnection) -> bytes:
        ps = self._ps
        if ps is None:
            return self._raw
        ps.last_conn = conn
        if self._payload[0] == _BULK:
            return bulk_packets(self._payload, ps, conn)
        wire = execute_packets(self._payload, self._raw, ps, conn)
        if ps.long_data_size:
            ps.reset_long_data()
        return wire

    def _new_relay(self, conn: BackendConnection, kind: ResponseKind) -> ResponseRelay:
        relay = ResponseRelay(
            kind,
            conn.caps,
            self.caps,
            self._write,
            status_hint=conn.status,
            local_infile=self._local_infile,
        )
        relay.on_done = self._done_cb
        relay.on_lost = self._lost_cb
        relay.on_infile = self._infile_cb
        return relay

    def _send(self, conn: BackendConnection, d: Decision | None) -> None:
        """Send the current command to ``conn`` with the response going to the client (through
        the connection's spare relay when its last response is complete)."""
        relay = conn.spare
        if self._streaming:
            relay = self._new_relay(conn, self._kind)  # its sink is the held-back answer
        elif relay is not None and relay.done:
            relay.reuse(self._kind, conn.status)
        else:
            relay = conn.spare = self._new_relay(conn, self._kind)
        if len(self._raw) >= _SEVERAL_PACKETS:
            relay.expect(self._reply_seq)  # an early error is numbered after the whole command
        self._decision = d
        self._target = conn.name
        self._conn = conn
        self._relay = relay
        ps = self._ps
        if ps is None:
            if self._streaming:
                self._send_streamed(conn, relay)
                return
            conn.submit(self._raw, relay)
            return
        ps.last_conn = conn
        if self._payload[0] == _BULK:
            conn.submit(bulk_packets(self._payload, ps, conn), relay)
            return
        wire = execute_packets(self._payload, self._raw, ps, conn)
        if ps.long_data_size:
            ps.reset_long_data()
        conn.submit(wire, relay)

    def _send_streamed(self, conn: BackendConnection, relay: ResponseRelay) -> None:
        """Send the first bytes of a streamed command; the rest follows as it arrives.  One
        that is already larger than the server's ``max_allowed_packet`` is refused here."""
        limit = conn.max_allowed_packet
        if limit is not None and self._stream_size > limit:
            self._relay = None
            self._stream_refused()
            self._check_buffer()
            if self._cbuf:
                self._pump()  # drop what arrived meanwhile
            return
        conn.submit(self._raw, relay)
        self._stream_attach(conn)

    def _pipelinable(self, d: Decision) -> bool:
        return (
            self._config.pipeline_waits
            and self._kind in _PIPELINABLE
            and d.statement.replica_safe
            and not self.policy.in_transaction
            and d.wait_set is not None
        )

    def _send_pipelined(self, conn: BackendConnection, d: Decision) -> None:
        """The wait and the read in one write; the wait's answer releases or discards the
        read's response (see the module docstring)."""
        assert d.wait_set is not None
        timeout = d.wait_timeout or self.policy.config.wait_timeout
        wait_sql = self._flavor.wait_statement(d.wait_set, timeout)
        collected = bytearray()
        wait = ResponseRelay(
            _QUERY, conn.caps, conn.caps, collected.extend, status_hint=conn.status
        )
        wait.deadline = wait_deadline(timeout)
        read = ResponseRelay(self._kind, conn.caps, self.caps, discard, status_hint=conn.status)
        started = time.monotonic()

        def waited(relay: ResponseRelay) -> None:
            self._guarded(
                self._pipelined_wait_done, relay, bytes(collected), read, conn, d, started
            )

        def wait_lost(_relay: ResponseRelay, _exc: BaseException | None) -> None:
            self._guarded(self._pipelined_wait_lost, conn, d, started)

        wait.on_done = waited
        wait.on_lost = wait_lost
        read.on_lost = lambda _r, _e: None  # the wait's failure handler covers both
        self._decision = d
        self._target = conn.name
        self._conn = conn
        self._relay = read
        conn.submit_many(
            [(frame_command(b"\x03" + wait_sql.encode()), wait), (self._wire(conn), read)]
        )

    def _pipelined_wait_done(
        self,
        _relay: ResponseRelay,
        collected: bytes,
        read: ResponseRelay,
        conn: BackendConnection,
        d: Decision,
        started: float,
    ) -> None:
        duration = time.monotonic() - started
        outcome = self._wait_outcome(parse_response(collected, conn.caps))
        self._observer.wait(d, outcome, duration, pipelined=True)
        nxt = self.policy.on_wait(d, outcome, duration=duration)
        if nxt.action is _EXECUTE and nxt.target == d.target and not nxt.prelude:
            read.write = self._write
            read.on_done = self._done_cb
            read.on_lost = self._lost_cb
            self._decision = nxt
            if self._tracing:
                self._observer.decision(nxt)
            return

        def discarded(_r: ResponseRelay) -> None:
            self._guarded(self._continue, nxt)

        def discard_lost(_r: ResponseRelay, _e: BaseException | None) -> None:
            self._guarded(self._continue, nxt)

        read.on_done = discarded
        read.on_lost = discard_lost

    def _pipelined_wait_lost(self, conn: BackendConnection, d: Decision, started: float) -> None:
        self._forget(conn)
        duration = time.monotonic() - started
        self._observer.wait(d, WaitOutcome.FAILED, duration, pipelined=True)
        self._continue(self.policy.on_wait(d, WaitOutcome.FAILED, duration=duration))

    def _continue(self, d: Decision) -> None:
        self._relay = None
        self._conn = None
        self._execute(d)

    def _wait_outcome(self, result: QueryResult) -> WaitOutcome:
        if result.error is not None:
            logger.warning(
                "session %d: replica refused the wait: %s", self.id, result.error.message
            )
            return WaitOutcome.ERROR
        try:
            return wait_outcome(self._flavor, result.scalar())
        except Error:
            return WaitOutcome.ERROR

    def _direct(
        self,
        target: str,
        kind: ResponseKind,
        post: Callable[[ResponseRelay], None] | None = None,
        *,
        client_stmt_id: int | None = None,
    ) -> None:
        """Send the current command to ``target`` without asking the policy (commands
        that are not statements: COM_INIT_DB, COM_PING, COM_STMT_PREPARE…)."""
        self._busy = True
        self._kind = kind
        self._post = post
        conn = self._ready_conn(target)
        if conn is not None:
            self._send_direct(conn, client_stmt_id)
        else:
            self._spawn(self._slow_direct(target, client_stmt_id))

    def _send_direct(self, conn: BackendConnection, client_stmt_id: int | None) -> None:
        relay = self._new_relay(conn, self._kind)
        relay.client_stmt_id = client_stmt_id
        if len(self._raw) >= _SEVERAL_PACKETS:
            relay.expect(self._reply_seq)
        self._decision = None
        self._target = conn.name
        self._conn = conn
        self._relay = relay
        conn.submit(self._raw, relay)

    def _direct_on(self, conn: BackendConnection, kind: ResponseKind, wire: bytes) -> None:
        self._busy = True
        self._kind = kind
        relay = self._new_relay(conn, kind)
        self._decision = None
        self._target = conn.name
        self._conn = conn
        self._relay = relay
        conn.submit(wire, relay)

    def _on_response(self, relay: ResponseRelay) -> None:
        try:
            if relay.insert_id:
                self.last_insert_id = relay.insert_id
            d = self._decision
            if d is not None and relay.state_oks is None and relay.error is None:
                # The common case: a statement that succeeded without session state.
                policy = self.policy
                policy.on_success(d)
                stmt = d.statement
                if stmt.kind is _SESSION_STATE and d.target == PRIMARY:
                    self._session_state_changed(d, self._conn)
                if policy.in_transaction and d.target == PRIMARY:
                    policy.observe_status(PRIMARY, in_transaction=bool(relay.status & _IN_TRANS))
                conn = self._conn
                if conn is not None:
                    conn.statement_duration.observe(time.monotonic() - self.command_at)
                self.statements += 1
                self._last = d
                self._tally.add(d.target, d.reason)
            else:
                self._complete(relay, d)
            post = self._post
            if post is not None:
                self._post = None
                post(relay)
        except Exception:
            logger.exception("session %d: completing a response failed", self.id)
        self._done()

    def _complete(self, relay: ResponseRelay, d: Decision | None) -> None:
        conn = self._conn
        oks = relay.state_oks
        if oks and conn is not None:
            self._observe(conn, oks)
        if relay.error is not None:
            self._metrics.statement_errors += 1
            if self._tracing:
                self._span_error(relay.error)
        if d is None:
            return
        policy = self.policy
        if relay.error is None:
            policy.on_success(d)
            stmt = d.statement
            if stmt.kind is _SESSION_STATE and d.target == PRIMARY:
                self._session_state_changed(d, conn)
        else:
            policy.on_error(d, connection_lost=False)
        if d.target == PRIMARY and policy.in_transaction:
            policy.observe_status(PRIMARY, in_transaction=bool(relay.status & _IN_TRANS))
        if conn is not None:
            conn.statement_duration.observe(time.monotonic() - self.command_at)
        self._account(d)

    def _session_state_changed(self, d: Decision, conn: BackendConnection | None) -> None:
        stmt = d.statement
        if stmt.schema is not None:
            self._schema = stmt.schema
            self._tracer.set_namespace(stmt.schema)
        if conn is not None and self._multiplex:
            conn.applied_seq = self.policy.replay_seq  # it ran there: the connection has it
        if conn is not None and "SESSION_TRACK" in d.sql.upper():
            conn.tracking = None  # the client changed the trackers: re-assert ours

    def _observe(self, conn: BackendConnection, oks: list[bytes]) -> None:
        """GTIDs from OK packets, to the policy."""
        flavor = self._flavor
        policy = self.policy
        for payload in oks:
            try:
                state = flavor.gtids_from_ok(parse_ok(payload, conn.caps))
            except RemoteProtocolError as e:
                logger.warning("undecodable session state from %s: %s", conn.address, e)
                continue
            if state is not None:
                policy.observe_gtids(conn.name, state)
                if self._tracing and conn.name == PRIMARY:
                    self._observer.produced(state)

    def _on_response_lost(self, relay: ResponseRelay, exc: BaseException | None) -> None:
        try:
            self._response_lost(relay, exc)
        except Exception:
            logger.exception("session %d: handling a lost backend failed", self.id)
            self.abort()

    def _response_lost(self, relay: ResponseRelay, exc: BaseException | None) -> None:
        conn = self._conn
        if conn is not None:
            self._forget(conn)
        self._metrics.backend_lost += 1
        d = self._decision
        target = self._target
        where = conn.address.name if conn is not None else target
        if relay.mid_packet:
            # Part of a packet reached the client: nothing valid can follow it.
            if d is not None:
                self.policy.on_error(d, connection_lost=True)
            self.abort()
            return
        seq = relay.fail_seq(self._reply_seq - 1)
        if target == PRIMARY:
            if d is not None:
                self.policy.on_error(d, connection_lost=True)
            message = (
                f"Lost connection to the primary {where} during the query ({exc or 'closed'}); "
                "it is not retried: reconnect"
            )
            self._reply_err(CR.SERVER_LOST, "HY000", message, seq)
            self.close(message)
            return
        retry = self.policy.on_error(d, connection_lost=True) if d is not None else None
        if retry is not None and not relay.wrote:
            self._metrics.retries += 1
            self._relay = None
            self._conn = None
            self._execute(retry)
            return
        self._reply_err(
            CR.SERVER_LOST,
            "HY000",
            f"Lost connection to the replica {where} during the query ({exc or 'closed'})",
            seq,
        )

    def _intercept(self, found: Intercept) -> None:
        self._metrics.intercepted += 1
        policy = self.policy
        if found.action == "select":
            columns = [
                (name, policy.level.value if variable == "level" else policy.token)
                for variable, name in found.columns
            ]
            decimals = NOT_FIXED_DEC_MARIADB if self._mariadb else NOT_FIXED_DEC_MYSQL
            self._write(
                result_set(
                    columns,
                    self.caps,
                    self._status(),
                    self._reply_seq,
                    charset=self.charset,
                    decimals=decimals,
                )
            )
            self._done()
            return
        value = found.value or ""
        if found.variable == "level":
            if found.oversized:
                self._wrong_level(value)
            elif value.upper() == "DEFAULT":
                policy.level = self._user_level or self._config.level
                self._reply_ok()
            else:
                try:
                    policy.level = Level.parse(value)
                except Error:
                    self._wrong_level(value)
                    return
                self._reply_ok()
            return
        try:
            if found.oversized:
                raise MalformedGtidSet(value)
            policy.require(value)
        except MalformedGtidSet as e:
            self._reply_err(
                e.errno or ER_MALFORMED_GTID_SET_SPECIFICATION, e.sqlstate, e.msg, self._reply_seq
            )
            return
        self._reply_ok()

    def _wrong_level(self, value: str) -> None:
        self._reply_err(
            ER.WRONG_VALUE_FOR_VAR,
            "42000",
            f"Variable 'consistent_level' can't be set to the value of '{value[:200]}'",
            self._reply_seq,
        )

    def status(self) -> dict[str, object]:
        """What ``/status`` shows about this session."""
        policy = self.policy
        txn = policy.transaction
        return {
            "id": self.id,
            "user": self.user,
            "peer": self.peer,
            "tls": self.tls,
            "level": policy.level.value,
            "token": policy.token,
            "autocommit": policy.autocommit,
            "transaction": None
            if txn is None
            else {"read_only": txn.read_only, "server": txn.server},
            "pins": list(policy.pins),
            "pin_reasons": self.pin_reasons(),
            "busy": self._busy,
            "backends": sorted(self._conns),
            "follow_up": self._follow is not None and not self._follow_up_lost(),
            "prepared_statements": len(self._statements),
            "statements": self.statements,
            "last_target": self.last_target,
            "last_reason": self.last_reason,
            "age_seconds": round(time.time() - self.started_at, 3),
        }


_COMMANDS: Final[dict[int, Callable[[Session, bytes], None]]] = {
    Command.QUERY: Session._cmd_query,
    Command.STMT_EXECUTE: Session._cmd_execute,
    Command.INIT_DB: Session._cmd_init_db,
    Command.PING: Session._cmd_ping,
    Command.QUIT: Session._cmd_quit,
    Command.FIELD_LIST: Session._cmd_field_list,
    Command.STMT_PREPARE: Session._cmd_prepare,
    Command.STMT_SEND_LONG_DATA: Session._cmd_long_data,
    Command.STMT_CLOSE: Session._cmd_close_statement,
    Command.STMT_RESET: Session._cmd_reset_statement,
    Command.STMT_FETCH: Session._cmd_fetch,
    Command.SET_OPTION: Session._cmd_simple_primary,
    Command.STATISTICS: Session._cmd_simple_primary,
    Command.RESET_CONNECTION: Session._cmd_reset_connection,
    Command.CHANGE_USER: Session._cmd_change_user,
    Command.PROCESS_KILL: Session._cmd_process_kill,
    Command.STMT_BULK_EXECUTE: Session._cmd_bulk_execute,
}
