"""A session's commands: each one parsed, then answered by the proxy or handed on.

One command is served at a time (:class:`~proxy.clientreader.ClientReader` holds the rest).
The handler dispatches on the command byte through a table: a statement (``COM_QUERY``,
``COM_STMT_EXECUTE``…) goes to the session's :class:`~proxy.routing.Router`; commands that are
not statements (``COM_INIT_DB``, ``COM_PING``, ``COM_STMT_PREPARE``…) go to the primary as
they are; what the proxy answers itself (``@@consistent_*``, ``KILL``, ``CONNECTION_ID()``,
``SHOW PROCESSLIST``, COM_RESET_CONNECTION, COM_CHANGE_USER) never reaches a server as written.
The handler also writes the proxy's own replies and ends each command (:meth:`done`).  A
malformed client packet closes this client only.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from consistent.classify import PrimaryReason, classify, classify_head
from consistent.errnos import CR, ER
from consistent.errors import (
    ER_MALFORMED_GTID_SET_SPECIFICATION,
    Error,
    MalformedGtidSet,
    RemoteProtocolError,
)
from consistent.policy import PRIMARY, Level
from consistent.protocol import ErrPacket, OkPacket, ServerStatus, build_err, build_ok
from consistent.protocol.constants import Command, MariaDbCapability
from proxy.backends import BackendConnection, BackendUnavailable
from proxy.errors import PoolExhausted, WritesRefused
from proxy.intercept import (
    NOT_FIXED_DEC_MARIADB,
    NOT_FIXED_DEC_MYSQL,
    Intercept,
    mentions_variable,
    parse_intercept,
    result_set,
)
from proxy.relay import ResponseKind, ResponseRelay
from proxy.sessioncommands import change_user, kill, reset_connection
from proxy.statements import LAST_PREPARED, PreparedStatement, StatementRegistry
from proxy.stream import frame, frame_command
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

if TYPE_CHECKING:
    from proxy.session import Session

__all__ = ["CommandHandler"]

logger = logging.getLogger(__name__)

_EXECUTE_KIND: Final = ResponseKind.EXECUTE
_FIELD_LIST_STATEMENT: Final = classify("SHOW COLUMNS FROM t")
_BULK_OPERATIONS: Final = int(MariaDbCapability.STMT_BULK_OPERATIONS)
_MAY_INTERCEPT: Final = (b"S", b"s")
_QUERY: Final = ResponseKind.QUERY


class CommandHandler:
    """The command being served and how each is (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._config = session.config
        # Which function calls a replica may run (the configuration's declared functions and
        # the servers' family), for every statement this session classifies.
        self._functions = session.host.functions
        self._mariadb = session.flavor.name == "mariadb"
        #: The prepared statements of the session, by the ids the client knows.
        self.prepared = StatementRegistry()
        #: A command is being served (what the client sends meanwhile waits).
        self.busy = False
        #: The command: its wire bytes, its payload, and the sequence id its reply starts at.
        self.raw = b""
        self.payload = b""
        self.reply_seq = 1
        #: When the last command began (``time.monotonic()``), for SHOW PROCESSLIST.
        self.command_at = time.monotonic()
        #: The kind of response it gets, and its prepared statement, if it executes one.
        self.kind = _QUERY
        self.ps: PreparedStatement | None = None
        #: What to do with its response once complete (a command that changes session state).
        self.post: Callable[[ResponseRelay], None] | None = None

    def command(self, raw: bytes, payload: bytes, reply_seq: int) -> None:
        """Serve one command from the client."""
        session = self._session
        broken = session.backends.broken
        if broken is not None:
            self.reply_err(CR.SERVER_LOST, "HY000", broken, reply_seq)
            session.close(broken)
            return
        self.raw = raw
        self.payload = payload
        self.reply_seq = reply_seq
        self.ps = None
        self.post = None
        self.command_at = time.monotonic()
        handler = _COMMANDS.get(payload[0]) if payload else None
        try:
            if handler is None:
                self.reply_err(
                    ER.UNKNOWN_COM_ERROR,
                    "08S01",
                    "Unknown command" if not payload else "Command not supported by the proxy",
                    reply_seq,
                )
                return
            handler(self, payload)
        except RemoteProtocolError as e:
            session.reader.protocol_error(
                ER.MALFORMED_PACKET, "HY000", f"Malformed packet: {e}", reply_seq
            )
        except Exception:
            logger.exception("session %d: command 0x%02x failed", session.id, payload[0])
            self.fail_command(ER.UNKNOWN_ERROR, "HY000", "internal proxy error")

    def done(self) -> None:
        """The current command is finished; serve what the client sent meanwhile.  A
        streamed command finishes once all of it has arrived (the rest of one answered
        without a server is dropped)."""
        session = self._session
        reader = session.reader
        if reader.streaming:
            reader.defer_done()
            return
        router = session.router
        router.finish()
        self.busy = False
        self.ps = None
        backends = session.backends
        if backends.multiplex and backends.conns:
            backends.give_back(router.conn)
            router.conn = None
        if session.drained():
            return
        if reader.buffer:
            reader.pump()

    # ----------------------------------------------------------------- statements

    def _cmd_query(self, payload: bytes) -> None:
        session = self._session
        reader = session.reader
        sql = payload[1:]
        streamed = reader.streaming
        first = sql[:16].lstrip()[:1]
        if first in _MAY_INTERCEPT and mentions_variable(sql):
            found = parse_intercept(
                sql,
                length=reader.stream_size - 1 if streamed else None,
                backslash_escapes=session.backends.backslash_escapes(),
            )
            if found is not None:
                self._intercept(found)
                return
        text = sql.decode("utf-8", "surrogateescape")
        stmt = classify_head(text, self._functions) if streamed else classify(text, self._functions)
        if streamed and stmt.first_keyword == "KILL":
            # Its end is not here yet, so what it names cannot be read: no KILL reaches a
            # server as written.
            self.reply_err(
                ER.PARSE_ERROR,
                "42000",
                f"You have an error in your SQL syntax: a KILL statement of "
                f"{reader.stream_size - 1} bytes",
                self.reply_seq,
            )
            return
        if stmt.primary_reason in THREAD_REASONS:
            answered = parse_thread_statement(stmt, text)
            if answered is not None:
                self._thread_statement(answered)
                return
        if stmt.primary_reason == PrimaryReason.LAST_INSERT_ID and session.backends.multiplex:
            column = parse_last_insert_id(text)
            if column is not None:
                # The session's own last insert, as the server would answer it, whichever
                # pooled connection the session would read (see the README's Multiplexing).
                self.busy = True
                reader.write(
                    last_insert_id_result(
                        column,
                        session.last_insert_id,
                        session.caps,
                        self._status(),
                        self.reply_seq,
                    )
                )
                self.done()
                return
        if (
            stmt.is_multi_statement
            and not stmt.must_use_primary
            and self._config.multi_statements_to_primary
        ):
            stmt = dataclasses.replace(
                stmt, must_use_primary=True, primary_reason="multi_statement"
            )
        self.kind = _QUERY
        session.router.route(stmt, text)

    def _thread_statement(self, found: ThreadStatement) -> None:
        """KILL, CONNECTION_ID() and SHOW PROCESSLIST, answered by the proxy (see
        :mod:`proxy.threads`)."""
        session = self._session
        if isinstance(found, Kill):
            self.busy = True
            session.spawn(kill(session, found))
        elif isinstance(found, ConnectionIdQuery):
            self.busy = True
            session.reader.write(
                connection_id_result(
                    found.column, session.id, session.caps, self._status(), self.reply_seq
                )
            )
            self.done()
        elif isinstance(found, ProcessList):
            self.busy = True
            rows = [
                s.process_row() for s in session.host.sessions.values() if s.user == session.user
            ]
            rows.sort(key=lambda row: row.id)
            session.reader.write(
                processlist_result(
                    rows,
                    full=found.full,
                    mariadb=self._mariadb,
                    capabilities=session.caps,
                    status=self._status(),
                    seq=self.reply_seq,
                )
            )
            self.done()
        else:
            server = "MariaDB" if self._mariadb else "MySQL"
            self.reply_err(
                ER.NOT_SUPPORTED_YET,
                "42000",
                f"This version of {server} doesn't yet support '{found.what}'",
                self.reply_seq,
            )

    def _cmd_field_list(self, _payload: bytes) -> None:
        self.kind = ResponseKind.FIELD_LIST
        self._session.router.route(_FIELD_LIST_STATEMENT, "")

    def _intercept(self, found: Intercept) -> None:
        session = self._session
        session.metrics.intercepted += 1
        policy = session.policy
        if found.action == "select":
            columns = [
                (name, policy.level.value if variable == "level" else policy.token)
                for variable, name in found.columns
            ]
            decimals = NOT_FIXED_DEC_MARIADB if self._mariadb else NOT_FIXED_DEC_MYSQL
            session.reader.write(
                result_set(
                    columns,
                    session.caps,
                    self._status(),
                    self.reply_seq,
                    charset=session.charset,
                    decimals=decimals,
                )
            )
            self.done()
            return
        value = found.value or ""
        if found.variable == "level":
            if found.oversized:
                self._wrong_level(value)
            elif value.upper() == "DEFAULT":
                policy.level = session.user_level or self._config.level
                self.reply_ok()
            else:
                try:
                    policy.level = Level.parse(value)
                except Error:
                    self._wrong_level(value)
                    return
                self.reply_ok()
            return
        try:
            if found.oversized:
                raise MalformedGtidSet(value)
            policy.require(value)
        except MalformedGtidSet as e:
            self.reply_err(
                e.errno or ER_MALFORMED_GTID_SET_SPECIFICATION, e.sqlstate, e.msg, self.reply_seq
            )
            return
        self.reply_ok()

    def _wrong_level(self, value: str) -> None:
        self.reply_err(
            ER.WRONG_VALUE_FOR_VAR,
            "42000",
            f"Variable 'consistent_level' can't be set to the value of '{value[:200]}'",
            self.reply_seq,
        )

    # ----------------------------------------------------------------- commands to the primary

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
        self.busy = True
        self.kind = kind
        self.post = post
        session = self._session
        conn = session.backends.ready_conn(target)
        if conn is not None:
            session.router.send_direct(conn, client_stmt_id)
        else:
            session.spawn(session.router.slow.direct(target, client_stmt_id))

    def _direct_on(self, conn: BackendConnection, kind: ResponseKind, wire: bytes) -> None:
        self.busy = True
        self.kind = kind
        self._session.router.send_on(conn, wire)

    def _cmd_init_db(self, payload: bytes) -> None:
        schema = payload[1:].decode("utf-8", "surrogateescape")
        session = self._session

        def record(relay: ResponseRelay) -> None:
            if relay.error is None:
                session.policy.record_schema(schema)
                conn = session.router.conn
                if conn is not None and session.backends.multiplex:
                    conn.applied_seq = session.policy.replay_seq
                session.router.set_schema(schema)

        self._direct(PRIMARY, ResponseKind.SIMPLE, record)

    def _cmd_ping(self, _payload: bytes) -> None:
        if self._session.backends.ready_conn(PRIMARY) is not None:
            self._direct(PRIMARY, ResponseKind.SIMPLE)
        else:
            self.reply_ok()

    def _cmd_quit(self, _payload: bytes) -> None:
        self._session.close()

    def _cmd_simple_primary(self, _payload: bytes) -> None:
        self._direct(PRIMARY, ResponseKind.SIMPLE)

    # ----------------------------------------------------------------- prepared statements

    def _cmd_prepare(self, payload: bytes) -> None:
        sql = payload[1:].decode("utf-8", "surrogateescape")
        stmt = classify(sql, self._functions)
        if kill_in_prepare(stmt):
            self.reply_err(
                ER.UNSUPPORTED_PS,
                "HY000",
                "This command is not supported in the prepared statement protocol yet",
                self.reply_seq,
            )
            return
        client_id = self.prepared.new_id()
        self.prepared.last = None  # until this one succeeds
        if stmt.is_multi_statement and not stmt.must_use_primary:
            stmt = dataclasses.replace(
                stmt, must_use_primary=True, primary_reason="multi_statement"
            )
        router = self._session.router

        def register(relay: ResponseRelay) -> None:
            conn = router.conn
            if relay.error is not None or relay.prepared is None or conn is None:
                return
            backend_id, columns, params = relay.prepared
            self.prepared.add(PreparedStatement(client_id, sql, stmt, params, columns))
            conn.statements[client_id] = backend_id

        self._direct(PRIMARY, ResponseKind.PREPARE, register, client_stmt_id=client_id)

    def _statement(self, payload: bytes, command: str) -> PreparedStatement | None:
        if len(payload) < 5:
            raise RemoteProtocolError(f"{command} is too short")
        client_id = int.from_bytes(payload[1:5], "little")
        ps = self.prepared.get(client_id)
        if ps is None:
            self._unknown_statement(client_id, command)
        return ps

    def _unknown_statement(self, client_id: int, command: str) -> None:
        self.reply_err(
            ER.UNKNOWN_STMT_HANDLER,
            "HY000",
            f"Unknown prepared statement handler ({client_id}) given to {command}",
            self.reply_seq,
        )

    def _cmd_execute(self, payload: bytes) -> None:
        if len(payload) < 10:
            raise RemoteProtocolError("COM_STMT_EXECUTE is too short")
        client_id = int.from_bytes(payload[1:5], "little")
        statements = self.prepared
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
            self.reply_err(
                ER.NET_PACKET_TOO_LARGE,
                "08S01",
                "Parameter data sent with COM_STMT_SEND_LONG_DATA exceeds max_allowed_packet",
                self.reply_seq,
            )
            return
        self.ps = ps
        self.kind = _EXECUTE_KIND
        self._session.router.route(ps.classification, ps.sql)

    def _cmd_bulk_execute(self, payload: bytes) -> None:
        """MariaDB's COM_STMT_BULK_EXECUTE: many rows of parameters in one command, for a
        client that negotiated bulk operations; a write, so it goes to the primary."""
        if not self._session.mariadb_caps & _BULK_OPERATIONS:
            self.reply_err(ER.UNKNOWN_COM_ERROR, "08S01", "Unknown command", self.reply_seq)
            return
        if len(payload) < 7:
            raise RemoteProtocolError("COM_STMT_BULK_EXECUTE is too short")
        client_id = int.from_bytes(payload[1:5], "little")
        ps = self.prepared.resolve(client_id)
        if ps is None:
            self._unknown_statement(client_id, "mysqld_stmt_bulk_execute")
            return
        stmt = ps.bulk
        if stmt is None:
            stmt = ps.bulk = dataclasses.replace(
                ps.classification,
                must_use_primary=True,
                primary_reason=ps.classification.primary_reason or PrimaryReason.WRITE,
            )
        self.ps = ps
        self.kind = _EXECUTE_KIND
        self._session.router.route(stmt, ps.sql)

    def _cmd_long_data(self, payload: bytes) -> None:
        if len(payload) < 7:
            raise RemoteProtocolError("COM_STMT_SEND_LONG_DATA is too short")
        ps = self.prepared.get(int.from_bytes(payload[1:5], "little"))
        if ps is not None:  # mysqld ignores unknown ids here: there is no response
            ps.add_long_data(payload, self._config.max_allowed_packet)

    def _cmd_close_statement(self, payload: bytes) -> None:
        if len(payload) < 5:
            raise RemoteProtocolError("COM_STMT_CLOSE is too short")
        client_id = int.from_bytes(payload[1:5], "little")
        self.prepared.remove(client_id)
        self._session.backends.close_statement(client_id)

    def _cmd_reset_statement(self, payload: bytes) -> None:
        ps = self._statement(payload, "mysqld_stmt_reset")
        if ps is None:
            return
        ps.reset_long_data()
        conn = ps.last_conn
        if not self._session.backends.holds(conn) or ps.client_id not in conn.statements:
            self.reply_ok()
            return
        wire = frame_command(b"\x1a" + conn.statements[ps.client_id].to_bytes(4, "little"))
        self._direct_on(conn, ResponseKind.SIMPLE, wire)

    def _cmd_fetch(self, payload: bytes) -> None:
        ps = self._statement(payload, "mysqld_stmt_fetch")
        if ps is None:
            return
        conn = ps.last_conn
        if not self._session.backends.holds(conn) or ps.client_id not in conn.statements:
            self.reply_err(
                ER.STMT_HAS_NO_OPEN_CURSOR,
                "HY000",
                f"The statement ({ps.client_id}) has no open cursor.",
                self.reply_seq,
            )
            return
        body = payload[:1] + conn.statements[ps.client_id].to_bytes(4, "little") + payload[5:]
        self._direct_on(conn, ResponseKind.FETCH, frame_command(body))

    # ----------------------------------------------------------------- the whole session

    def _cmd_reset_connection(self, _payload: bytes) -> None:
        self.busy = True
        self._session.spawn(reset_connection(self._session))

    def _cmd_change_user(self, payload: bytes) -> None:
        self.busy = True
        self._session.spawn(change_user(self._session, payload))

    def _cmd_process_kill(self, payload: bytes) -> None:
        if len(payload) < 5:
            raise RemoteProtocolError("COM_PROCESS_KILL is too short")
        self.busy = True
        found = Kill(int.from_bytes(payload[1:5], "little"), query_only=False)
        self._session.spawn(kill(self._session, found))

    # ----------------------------------------------------------------- the proxy's replies

    def _status(self) -> ServerStatus:
        policy = self._session.policy
        status = ServerStatus.AUTOCOMMIT if policy.autocommit else ServerStatus(0)
        txn = policy.transaction
        if txn is not None:
            status |= ServerStatus.IN_TRANS
            if txn.read_only:
                status |= ServerStatus.IN_TRANS_READONLY
        return status

    def reply_ok(self) -> None:
        """End the current command with an OK."""
        session = self._session
        session.reader.write(
            frame(build_ok(OkPacket(status=self._status()), session.caps), self.reply_seq)
        )
        self.done()

    def reply_err(self, errno: int, sqlstate: str | None, message: str, seq: int) -> None:
        """End the current command with an ERR numbered ``seq``."""
        session = self._session
        session.reader.write(
            frame(build_err(ErrPacket(errno, sqlstate, message), session.caps), seq)
        )
        session.router.failed(errno, sqlstate, message)
        self.done()

    def reply_error(self, error: Error | None) -> None:
        """End the current command with ``error`` (the policy's)."""
        if error is None:
            self.reply_err(ER.UNKNOWN_ERROR, "HY000", "unknown error", self.reply_seq)
            return
        self.reply_err(
            error.errno or ER.UNKNOWN_ERROR, error.sqlstate or "HY000", error.msg, self.reply_seq
        )

    def fail_command(self, errno: int, sqlstate: str, message: str) -> None:
        """End the current command with an ERR, whatever state it was in."""
        router = self._session.router
        relay = router.relay
        if relay is not None and relay.mid_packet:
            self._session.abort()
            return
        seq = (
            relay.fail_seq(self.reply_seq - 1)
            if relay is not None and relay.wrote
            else (self.reply_seq)
        )
        conn = router.conn
        if relay is not None and conn is not None and not relay.done:
            self._session.backends.forget(conn)  # its stream position is unknown
        self.reply_err(errno, sqlstate, message, seq)

    def unavailable(self, e: BackendUnavailable) -> None:
        """End the current command: ``e.server`` could not be reached."""
        if isinstance(e, PoolExhausted):
            self.reply_err(ER.CON_COUNT_ERROR, "08004", e.reason, self.reply_seq)
            return
        if isinstance(e, WritesRefused):
            self.reply_err(ER.OPTION_PREVENTS_STATEMENT, "HY000", e.reason, self.reply_seq)
            return
        login = e.login_error
        if login is not None and login.errno is not None:
            self.reply_err(login.errno, login.sqlstate or "HY000", login.msg, self.reply_seq)
            return
        self.reply_err(
            CR.CONN_HOST_ERROR, "HY000", f"Can't connect to {e.server}: {e.reason}", self.reply_seq
        )

    def broken_now(self, message: str) -> None:
        """End the current command and the session: it cannot go on."""
        self.reply_err(CR.SERVER_LOST, "HY000", message, self.reply_seq)
        self._session.close(message)


_COMMANDS: Final[dict[int, Callable[[CommandHandler, bytes], None]]] = {
    Command.QUERY: CommandHandler._cmd_query,
    Command.STMT_EXECUTE: CommandHandler._cmd_execute,
    Command.INIT_DB: CommandHandler._cmd_init_db,
    Command.PING: CommandHandler._cmd_ping,
    Command.QUIT: CommandHandler._cmd_quit,
    Command.FIELD_LIST: CommandHandler._cmd_field_list,
    Command.STMT_PREPARE: CommandHandler._cmd_prepare,
    Command.STMT_SEND_LONG_DATA: CommandHandler._cmd_long_data,
    Command.STMT_CLOSE: CommandHandler._cmd_close_statement,
    Command.STMT_RESET: CommandHandler._cmd_reset_statement,
    Command.STMT_FETCH: CommandHandler._cmd_fetch,
    Command.SET_OPTION: CommandHandler._cmd_simple_primary,
    Command.STATISTICS: CommandHandler._cmd_simple_primary,
    Command.RESET_CONNECTION: CommandHandler._cmd_reset_connection,
    Command.CHANGE_USER: CommandHandler._cmd_change_user,
    Command.PROCESS_KILL: CommandHandler._cmd_process_kill,
    Command.STMT_BULK_EXECUTE: CommandHandler._cmd_bulk_execute,
}
