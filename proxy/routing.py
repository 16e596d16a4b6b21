"""A session's statements: routed by the policy, sent to a backend, completed from the response.

The router drives :class:`~consistent.policy.SessionPolicy` exactly as its docstring says
(route, then fetch/wait/execute, then report success or error) and re-implements none of it.

Two paths serve a statement:

* the *fast path*, synchronous in the client's ``data_received``: the policy names a server
  whose connection is open and in the session's state, the command bytes are written to it, and
  the backend's ``data_received`` relays the response and reports completion — no task switch,
  no copy of row data;
* the *slow path* (:mod:`proxy.slowpath`), a task, for everything that must wait: opening a
  backend connection, replaying session state on it, waits that cannot be pipelined, reading
  the primary's executed state, preludes, preparing a statement on a replica.

A wait on a replica is pipelined with the read when that is safe (a replica-safe read outside a
transaction, on a connection already in the session's state): both go in one write; the wait's
answer, processed before the first byte of the read's, decides whether the read's response goes
to the client or is discarded (timeout: the policy then names the fallback).

Failure rules (a backend silent past its deadline counts as dead, see :mod:`proxy.backends`): a
read whose replica dies before any byte reached the client is retried where the policy says
(once); a replica dying mid-response gives the client ERR 2013 and the session goes on;
the primary dying with a command in flight gives ERR 2013 and closes the session (nothing sent
to the primary is ever replayed).  A primary connection lost while idle is reopened
transparently unless the session had state only it held (a transaction, a pin), in which case
the next command gets ERR 2013 and the session closes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from consistent.classify import Classification, StatementKind
from consistent.errnos import CR, ER
from consistent.errors import Error, OperationalError, RemoteProtocolError
from consistent.observe import Fanout, Observer
from consistent.policy import (
    PRIMARY,
    Action,
    Decision,
    WaitOutcome,
    wait_outcome,
)
from consistent.policy.driver import wait_query
from consistent.protocol import ServerStatus, parse_err, parse_ok
from consistent.protocol.constants import MAX_PACKET_PAYLOAD, Command
from consistent.telemetry import NOOP_SPAN, StatementSpan
from proxy.backends import BackendConnection, BackendServer
from proxy.relay import QueryResult, ResponseKind, ResponseRelay, discard, parse_response
from proxy.slowpath import SlowPath
from proxy.statements import bulk_packets, execute_packets
from proxy.stream import frame_command, header

if TYPE_CHECKING:
    from proxy.session import Session

__all__ = ["Router"]

logger = logging.getLogger(__name__)

_EXECUTE: Final = Action.EXECUTE
_IN_TRANS: Final = int(ServerStatus.IN_TRANS)
_BULK: Final = int(Command.STMT_BULK_EXECUTE)
#: A command this long on the wire came in several packets (a 16 MiB one and more).
_SEVERAL_PACKETS: Final = MAX_PACKET_PAYLOAD + 4
_PIPELINABLE: Final = frozenset({ResponseKind.QUERY, ResponseKind.EXECUTE, ResponseKind.FIELD_LIST})
_QUERY: Final = ResponseKind.QUERY
_SESSION_STATE: Final = StatementKind.SESSION_STATE


class Router:
    """Routing and completion of one session's statements (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._handler = session.handler
        self._backends = session.backends
        self._reader = session.reader
        self._flavor = session.flavor
        self._metrics = session.metrics
        self._pipeline_waits = session.config.pipeline_waits
        #: What the statement being served was routed by (``None`` for a command sent
        #: without the policy).
        self.decision: Decision | None = None
        #: Where it went, on which connection, and the relay of its response.
        self.target = PRIMARY
        self.conn: BackendConnection | None = None
        self.relay: ResponseRelay | None = None
        #: Routed statements so far, and the last one's decision.
        self.statements = 0
        self._last: Decision | None = None
        self.tally = self._metrics.tally()
        # Tracing: one span per routed statement (the shared no-op span when tracing is off).
        primary = session.config.backends.primary
        self.tracer = session.host.telemetry.session(
            system=self._flavor.name,
            addresses={PRIMARY: (primary.host, primary.port)},
            session_id=f"proxy-{session.id}-{int(session.started_at * 1000)}",
        )
        self.tracing = self.tracer.enabled
        self.tracer.set_namespace(session.schema)
        self.span: StatementSpan = NOOP_SPAN
        # Each event of a statement is reported once, to ``observer``: the metrics, and with
        # tracing the statement's span too (swapped into ``_events`` per statement).
        self._events = Fanout(NOOP_SPAN, self._metrics)
        self.observer: Observer = self._events if self.tracing else self._metrics
        #: Required GTIDs a failover lost (the primary the session follows never had them).
        self.lost_gtids: str | None = None
        #: What statements await (a task each, see :mod:`proxy.slowpath`).
        self.slow = SlowPath(session, self)
        # Bound once: every command hands them to a relay.
        self._done_cb = self._on_response
        self._lost_cb = self._on_response_lost
        self._infile_cb = self._on_infile

    @property
    def last_target(self) -> str | None:
        """Where the last routed statement went."""
        return self._last.target if self._last is not None else None

    @property
    def last_reason(self) -> str | None:
        """Why, as traces show it (``pinned(temporary_table)``)."""
        return self._last.reason_text if self._last is not None else None

    def primary_moved(self, server: BackendServer) -> None:
        """Spans name ``server`` as the primary from now on."""
        self.tracer.set_address(PRIMARY, (server.address.host, server.address.port))

    def set_schema(self, schema: str | None) -> None:
        """The session's current schema changed to ``schema``."""
        self._session.schema = schema
        self.tracer.set_namespace(schema)

    # ----------------------------------------------------------------- routing

    def route(self, stmt: Classification, text: str) -> None:
        """Route the current command's statement (its response kind already set)."""
        handler = self._handler
        handler.busy = True
        backends = self._backends
        if backends.follow is not None:
            if not stmt.follows_previous:
                backends.unreserve()
            elif backends.follow_up_lost():
                handler.reply_err(
                    ER.UNKNOWN_ERROR,
                    "HY000",
                    "The previous statement's connection went to another session (the "
                    "backend pool was exhausted): its diagnostics are no longer available",
                    handler.reply_seq,
                )
                return
        if self.tracing:
            span = self.tracer.statement(text)
            span.__enter__()
            self.span = self._events.first = span
            if self.lost_gtids is not None:
                self.observer.lost(self.lost_gtids)
        self.execute(self._session.policy.route(stmt, text))

    def execute(self, d: Decision) -> None:
        """Act on a decision: on the fast path when possible, else in a task."""
        if self.tracing:
            self.observer.decision(d)
        action = d.action
        if action is _EXECUTE and self._reader.streaming:
            pass  # the slow path reads the server's packet limit first
        elif action is _EXECUTE:
            if not d.prelude:
                conn = self._ready(d.target)
                if conn is not None:
                    self.send(conn, d)
                    return
        elif action is Action.WAIT:
            if self.pipelinable(d):
                conn = self._ready(d.target)
                if conn is not None:
                    self.send_pipelined(conn, d)
                    return
        elif action is Action.DEFER:
            self._account(d)
            self._handler.reply_ok()
            return
        elif action is Action.FAIL:
            self._account(d)
            self._handler.reply_error(d.error)
            return
        self._session.spawn(self.slow.run(d))

    def _ready(self, target: str) -> BackendConnection | None:
        """``target``'s connection if the statement can go there now (its prepared statement
        included)."""
        conn = self._backends.ready_conn(target)
        ps = self._handler.ps
        if conn is None or (ps is not None and ps.client_id not in conn.statements):
            return None
        return conn

    def _account(self, d: Decision) -> None:
        self.statements += 1
        self._last = d
        self.tally.add(d.target, d.reason)

    # ----------------------------------------------------------------- sending

    def _wire(self, conn: BackendConnection) -> bytes:
        handler = self._handler
        ps = handler.ps
        if ps is None:
            return handler.raw
        ps.last_conn = conn
        if handler.payload[0] == _BULK:
            return bulk_packets(handler.payload, ps, conn)
        wire = execute_packets(handler.payload, handler.raw, ps, conn)
        if ps.long_data_size:
            ps.reset_long_data()
        return wire

    def _new_relay(self, conn: BackendConnection, kind: ResponseKind) -> ResponseRelay:
        relay = ResponseRelay(
            kind,
            conn.caps,
            self._session.caps,
            self._reader.write,
            status_hint=conn.status,
            local_infile=self._session.local_infile,
        )
        relay.on_done = self._done_cb
        relay.on_lost = self._lost_cb
        relay.on_infile = self._infile_cb
        return relay

    def send(self, conn: BackendConnection, d: Decision | None) -> None:
        """Send the current command to ``conn`` with the response going to the client (through
        the connection's spare relay when its last response is complete)."""
        handler = self._handler
        streaming = self._reader.streaming
        relay = conn.spare
        if streaming:
            relay = self._new_relay(conn, handler.kind)  # its sink is the held-back answer
        elif relay is not None and relay.done:
            relay.reuse(handler.kind, conn.status)
        else:
            relay = conn.spare = self._new_relay(conn, handler.kind)
        raw = handler.raw
        if len(raw) >= _SEVERAL_PACKETS:
            relay.expect(handler.reply_seq)  # an early error is numbered after the whole command
        self.decision = d
        self.target = conn.name
        self.conn = conn
        self.relay = relay
        ps = handler.ps
        if ps is None:
            if streaming:
                self._send_streamed(conn, relay)
                return
            conn.submit(raw, relay)
            return
        ps.last_conn = conn
        payload = handler.payload
        if payload[0] == _BULK:
            conn.submit(bulk_packets(payload, ps, conn), relay)
            return
        wire = execute_packets(payload, raw, ps, conn)
        if ps.long_data_size:
            ps.reset_long_data()
        conn.submit(wire, relay)

    def _send_streamed(self, conn: BackendConnection, relay: ResponseRelay) -> None:
        """Send the first bytes of a streamed command; the rest follows as it arrives.  One
        that is already larger than the server's ``max_allowed_packet`` is refused here."""
        reader = self._reader
        limit = conn.max_allowed_packet
        if limit is not None and reader.stream_size > limit:
            self.relay = None
            reader.refused()
            reader.check_buffer()
            if reader.buffer:
                reader.pump()  # drop what arrived meanwhile
            return
        conn.submit(self._handler.raw, relay)
        reader.attach(conn)

    def send_direct(self, conn: BackendConnection, client_stmt_id: int | None) -> None:
        """Send the current command to ``conn`` as it is, without the policy."""
        handler = self._handler
        relay = self._new_relay(conn, handler.kind)
        relay.client_stmt_id = client_stmt_id
        if len(handler.raw) >= _SEVERAL_PACKETS:
            relay.expect(handler.reply_seq)
        self.decision = None
        self.target = conn.name
        self.conn = conn
        self.relay = relay
        conn.submit(handler.raw, relay)

    def send_on(self, conn: BackendConnection, wire: bytes) -> None:
        """Send ``wire`` (the current command, rewritten for ``conn``) without the policy."""
        relay = self._new_relay(conn, self._handler.kind)
        self.decision = None
        self.target = conn.name
        self.conn = conn
        self.relay = relay
        conn.submit(wire, relay)

    def drop_relay(self) -> None:
        """The proxy answers the current command itself: its response is no longer awaited."""
        relay = self.relay
        if relay is not None:
            relay.on_done = None
            relay.on_lost = None
        self.relay = None

    # ----------------------------------------------------------------- pipelined waits

    def pipelinable(self, d: Decision) -> bool:
        return (
            self._pipeline_waits
            and self._handler.kind in _PIPELINABLE
            and d.statement.replica_safe
            and not self._session.policy.in_transaction
            and d.wait_set is not None
        )

    def send_pipelined(self, conn: BackendConnection, d: Decision) -> None:
        """The wait and the read in one write; the wait's answer releases or discards the
        read's response (see the module docstring)."""
        query = wait_query(self._session.policy, self._flavor, d)
        wait_sql = query.sql
        collected = bytearray()
        wait = ResponseRelay(
            _QUERY, conn.caps, conn.caps, collected.extend, status_hint=conn.status
        )
        wait.deadline = query.deadline
        read = ResponseRelay(
            self._handler.kind, conn.caps, self._session.caps, discard, status_hint=conn.status
        )
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
        self.decision = d
        self.target = conn.name
        self.conn = conn
        self.relay = read
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
        outcome = self.wait_outcome(parse_response(collected, conn.caps))
        self.observer.wait(d, outcome, duration, pipelined=True)
        nxt = self._session.policy.on_wait(d, outcome, duration=duration)
        if nxt.action is _EXECUTE and nxt.target == d.target and not nxt.prelude:
            read.write = self._reader.write
            read.on_done = self._done_cb
            read.on_lost = self._lost_cb
            self.decision = nxt
            if self.tracing:
                self.observer.decision(nxt)
            return

        def discarded(_r: ResponseRelay) -> None:
            self._guarded(self._continue, nxt)

        def discard_lost(_r: ResponseRelay, _e: BaseException | None) -> None:
            self._guarded(self._continue, nxt)

        read.on_done = discarded
        read.on_lost = discard_lost

    def _pipelined_wait_lost(self, conn: BackendConnection, d: Decision, started: float) -> None:
        self._backends.forget(conn)
        duration = time.monotonic() - started
        self.observer.wait(d, WaitOutcome.FAILED, duration, pipelined=True)
        self._continue(self._session.policy.on_wait(d, WaitOutcome.FAILED, duration=duration))

    def _continue(self, d: Decision) -> None:
        self.relay = None
        self.conn = None
        self.execute(d)

    def wait_outcome(self, result: QueryResult) -> WaitOutcome:
        if result.error is not None:
            logger.warning(
                "session %d: replica refused the wait: %s",
                self._session.id,
                result.error.message,
            )
            return WaitOutcome.ERROR
        try:
            return wait_outcome(self._flavor, result.scalar())
        except Error:
            return WaitOutcome.ERROR

    def _guarded(self, fn: Callable[..., None], *args: Any) -> None:
        """Run a callback from a backend's ``data_received``: a failure ends this command
        with an error instead of breaking the backend connection's loop."""
        try:
            fn(*args)
        except Exception:
            logger.exception("session %d: response handling failed", self._session.id)
            self._handler.fail_command(ER.UNKNOWN_ERROR, "HY000", "internal proxy error")

    # ----------------------------------------------------------------- responses

    def _on_response(self, relay: ResponseRelay) -> None:
        handler = self._handler
        try:
            if relay.insert_id:
                self._session.last_insert_id = relay.insert_id
            d = self.decision
            if d is not None and relay.state_oks is None and relay.error is None:
                # The common case: a statement that succeeded without session state.
                policy = self._session.policy
                policy.on_success(d)
                stmt = d.statement
                if stmt.kind is _SESSION_STATE and d.target == PRIMARY:
                    self._session_state_changed(d, self.conn)
                if policy.in_transaction and d.target == PRIMARY:
                    policy.observe_status(PRIMARY, in_transaction=bool(relay.status & _IN_TRANS))
                conn = self.conn
                if conn is not None:
                    conn.statement_duration.observe(time.monotonic() - handler.command_at)
                self.statements += 1
                self._last = d
                self.tally.add(d.target, d.reason)
            else:
                self._complete(relay, d)
            post = handler.post
            if post is not None:
                handler.post = None
                post(relay)
        except Exception:
            logger.exception("session %d: completing a response failed", self._session.id)
        handler.done()

    def _complete(self, relay: ResponseRelay, d: Decision | None) -> None:
        conn = self.conn
        oks = relay.state_oks
        if oks and conn is not None:
            self._observe(conn, oks)
        if relay.error is not None:
            self._metrics.statement_errors += 1
            if self.tracing:
                self._span_error(relay.error)
        if d is None:
            return
        policy = self._session.policy
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
            conn.statement_duration.observe(time.monotonic() - self._handler.command_at)
        self._account(d)

    def _session_state_changed(self, d: Decision, conn: BackendConnection | None) -> None:
        stmt = d.statement
        if stmt.schema is not None:
            self.set_schema(stmt.schema)
        if conn is not None and self._backends.multiplex:
            conn.applied_seq = self._session.policy.replay_seq  # it ran there: it has it
        if conn is not None and "SESSION_TRACK" in d.sql.upper():
            conn.tracking = None  # the client changed the trackers: re-assert ours

    def _observe(self, conn: BackendConnection, oks: list[bytes]) -> None:
        """GTIDs from OK packets, to the policy."""
        flavor = self._flavor
        policy = self._session.policy
        for payload in oks:
            try:
                state = flavor.gtids_from_ok(parse_ok(payload, conn.caps))
            except RemoteProtocolError as e:
                logger.warning("undecodable session state from %s: %s", conn.address, e)
                continue
            if state is not None:
                policy.observe_gtids(conn.name, state)
                if self.tracing and conn.name == PRIMARY:
                    self.observer.produced(state)

    def _on_response_lost(self, relay: ResponseRelay, exc: BaseException | None) -> None:
        try:
            self._response_lost(relay, exc)
        except Exception:
            logger.exception("session %d: handling a lost backend failed", self._session.id)
            self._session.abort()

    def _response_lost(self, relay: ResponseRelay, exc: BaseException | None) -> None:
        session = self._session
        handler = self._handler
        conn = self.conn
        if conn is not None:
            self._backends.forget(conn)
        self._metrics.backend_lost += 1
        d = self.decision
        target = self.target
        where = conn.address.name if conn is not None else target
        if relay.mid_packet:
            # Part of a packet reached the client: nothing valid can follow it.
            if d is not None:
                session.policy.on_error(d, connection_lost=True)
            session.abort()
            return
        seq = relay.fail_seq(handler.reply_seq - 1)
        if target == PRIMARY:
            if d is not None:
                session.policy.on_error(d, connection_lost=True)
            message = (
                f"Lost connection to the primary {where} during the query ({exc or 'closed'}); "
                "it is not retried: reconnect"
            )
            handler.reply_err(CR.SERVER_LOST, "HY000", message, seq)
            session.close(message)
            return
        retry = session.policy.on_error(d, connection_lost=True) if d is not None else None
        if retry is not None and not relay.wrote:
            self._metrics.retries += 1
            self.relay = None
            self.conn = None
            self.execute(retry)
            return
        handler.reply_err(
            CR.SERVER_LOST,
            "HY000",
            f"Lost connection to the replica {where} during the query ({exc or 'closed'})",
            seq,
        )

    def _on_infile(self, relay: ResponseRelay) -> None:
        conn = self.conn
        if conn is None:
            return
        if relay.local_infile:
            self._reader.start_infile(conn)
        else:
            conn.write(header(0, relay.infile_seq + 1))

    def client_write_paused(self, paused: bool) -> None:
        """Flow control: stop reading the backend that feeds a slow client."""
        conn = self.conn
        transport = conn.transport if conn is not None else None
        if transport is None:
            return
        if paused:
            transport.pause_reading()
        else:
            transport.resume_reading()

    # ----------------------------------------------------------------- spans

    def failed(self, errno: int, sqlstate: str | None, message: str) -> None:
        """The current statement ended with an error the proxy answered."""
        if self.span is not NOOP_SPAN:
            self.observer.fail(OperationalError(errno, message, sqlstate=sqlstate))

    def _span_error(self, payload: bytes) -> None:
        try:
            err = parse_err(payload, self._session.caps)
        except RemoteProtocolError:
            return
        self.observer.fail(OperationalError(err.errno, err.message, sqlstate=err.sqlstate))

    def finish(self) -> None:
        """The current command ended: its span closes (naming what binds the session)."""
        span = self.span
        if span is not NOOP_SPAN:
            backends = self._backends
            if backends.multiplex and backends.conns:
                bound = backends.pin_reasons()
                if bound:
                    reasons = ",".join(dict.fromkeys(r for rs in bound.values() for r in rs))
                    self.observer.pin(reasons)
            self.span = self._events.first = NOOP_SPAN
            span.__exit__(None, None, None)
        self.relay = None
        self.decision = None
