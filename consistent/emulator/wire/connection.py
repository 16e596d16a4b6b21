"""One client connection: login, then a command loop that dispatches on the command byte.

Every command is answered from the engine's :class:`~consistent.emulator.session.Session`;
this module only moves bytes: it parses the command with the codec, calls the session, and
writes what :mod:`.encode` makes of the result.  Statement errors become ERR packets and the
connection goes on; bytes that are not protocol close this connection alone (logged at
warning); an unknown command byte is ERR 1047.

The session is opened when the client connects, as mysqld creates its THD before
authentication, so that the handshake can announce the id ``CONNECTION_ID()`` and ``KILL``
use.  It is bound to the authenticated user once the password checks out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Protocol

from consistent.emulator.results import Outcome
from consistent.emulator.wire import encode
from consistent.emulator.wire.auth import SERVER_CAPABILITIES, Attempt, Authenticator, new_nonce
from consistent.emulator.wire.auth import access_denied as _access_denied
from consistent.emulator.wire.config import WireConfig
from consistent.emulator.wire.errors import wire_error
from consistent.emulator.wire.params import execute_statement_id, parse_execute
from consistent.emulator.wire.stream import (
    PacketsOutOfOrder,
    PacketStream,
    PacketTooLarge,
    PeerClosed,
)
from consistent.errnos import ER
from consistent.errors import Error, RemoteProtocolError
from consistent.protocol.auth import MYSQL_NATIVE_PASSWORD
from consistent.protocol.binary import BinaryType
from consistent.protocol.commands import (
    parse_change_user,
    parse_field_list,
    parse_init_db,
    parse_process_kill,
    parse_set_option,
    parse_stmt_close,
    parse_stmt_fetch,
    parse_stmt_prepare,
    parse_stmt_reset,
    parse_stmt_send_long_data,
)
from consistent.protocol.constants import Capability, Command, SetOption
from consistent.protocol.handshake import (
    build_handshake_v10,
    is_ssl_request,
    parse_handshake_response41,
)
from consistent.protocol.lenenc import decode_text
from consistent.protocol.responses import ErrPacket, build_err

if TYPE_CHECKING:
    from consistent.emulator.server import EmulatedServer
    from consistent.emulator.session import Session
    from consistent.emulator.sql.lexer import Statement

__all__ = ["Connection", "ConnectionHost"]

logger = logging.getLogger(__name__)

_UNKNOWN_ERROR_SQLSTATE: Final = "HY000"
_LINGER_SECONDS: Final = 1.0  # bound on draining an oversized packet before closing
_SET_OPTIONS: Final = frozenset(int(option) for option in SetOption)


class ConnectionHost(Protocol):
    """What a connection needs from the front-end that accepted it."""

    @property
    def server(self) -> EmulatedServer: ...

    @property
    def auth(self) -> Authenticator: ...

    @property
    def config(self) -> WireConfig: ...


@dataclass(slots=True)
class _Statement:
    """What the front-end remembers of a prepared statement between packets."""

    param_count: int
    types: tuple[BinaryType, ...] | None = None
    long_data: dict[int, bytearray] = field(default_factory=dict)
    long_data_size: int = 0


_Handler = Callable[["Connection", bytes], Awaitable[bool]]


class Connection:
    """One client connection's task body; see the module docstring.

    ``busy`` is true while a command runs; :meth:`request_close` closes an idle connection at
    once and a busy one after its current command.
    """

    def __init__(
        self, host: ConnectionHost, stream: PacketStream, session: Session, peer_host: str
    ) -> None:
        self._host = host
        self.stream = stream
        self.session = session
        self.peer_host = peer_host
        self.capabilities = 0
        self.authenticated = False
        self.busy = False
        self.closing = False
        self._nonce = new_nonce()
        self._statements: dict[int, _Statement] = {}
        self._definitions = encode.ColumnDefinitions()

    @property
    def connection_id(self) -> int:
        """``CONNECTION_ID()`` of this connection (also announced in the handshake)."""
        return self.session.connection_id

    @property
    def session_gone(self) -> bool:
        """Whether the engine closed or killed the session (``KILL`` from any connection)."""
        return bool(self.session.closed or self.session.killed)

    def request_close(self) -> None:
        """Close at once if idle, else after the running command."""
        self.closing = True
        if not self.busy:
            self.stream.abort_reads()

    # ----- lifecycle --------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection until the client quits, misbehaves or the server closes it.

        The session is closed and the socket closed in every case; a cancellation (server
        shutdown) closes them too and is re-raised.
        """
        # Not try/finally: compiled with mypyc, a ``finally`` that waits re-raised the error
        # that an ``except`` clause before it had handled.
        try:
            await self._serve_connection()
        except BaseException as exc:
            await self._finish()
            raise exc
        await self._finish()

    async def _serve_connection(self) -> None:
        try:
            if await self._login():
                await self._serve()
        except PeerClosed:
            logger.debug("connection %d: client closed the connection", self.connection_id)
        except PacketTooLarge as e:
            logger.warning("connection %d: %s", self.connection_id, e)
            await self._send_quietly(wire_error(ER.NET_PACKET_TOO_LARGE))
            await self.stream.discard(e.unread, _LINGER_SECONDS)
        except PacketsOutOfOrder as e:
            logger.warning("connection %d: %s", self.connection_id, e)
            await self._send_quietly(wire_error(ER.NET_PACKETS_OUT_OF_ORDER))
        except RemoteProtocolError as e:
            logger.warning("connection %d: malformed packet, closing: %s", self.connection_id, e)
        except TimeoutError:
            logger.info("connection %d: network timeout, closing", self.connection_id)
        except OSError as e:
            logger.debug("connection %d: connection lost: %s", self.connection_id, e)

    async def _finish(self) -> None:
        try:
            await self.session.close()
        except Exception:
            logger.exception("connection %d: closing the session failed", self.connection_id)
        await self.stream.close(self._host.config.net_write_timeout)

    async def _send_quietly(self, err: ErrPacket) -> None:
        """Best effort: the connection is closing anyway."""
        with contextlib.suppress(OSError, TimeoutError):
            await self.stream.send(build_err(err, self.capabilities | Capability.PROTOCOL_41))

    # ----- login --------------------------------------------------------------------------------

    async def _login(self) -> bool:
        config = self._host.config
        version = str(self._host.server.config.version)
        handshake = self._host.auth.handshake(self.connection_id, self._nonce, version)
        await self.stream.send(build_handshake_v10(handshake))
        try:
            async with asyncio.timeout(config.connect_timeout):
                return await self._authenticate()
        except TimeoutError:
            logger.info("connection %d: login timed out", self.connection_id)
            return False

    async def _authenticate(self) -> bool:
        payload = await self.stream.read(self._host.config.connect_timeout)
        if is_ssl_request(payload):
            # TLS is not offered; a client that insists gets mysqld's bad-handshake error.
            await self._send_quietly(wire_error(ER.HANDSHAKE_ERROR))
            return False
        response = parse_handshake_response41(payload, SERVER_CAPABILITIES)
        self.capabilities = int(response.capabilities) & int(SERVER_CAPABILITIES)
        plugin = MYSQL_NATIVE_PASSWORD
        if self.capabilities & Capability.PLUGIN_AUTH and response.auth_plugin_name:
            plugin = response.auth_plugin_name
        attempt = Attempt(
            response.username, plugin, response.auth_response, self._nonce, self.peer_host
        )
        if not await self._host.auth.authenticate(self.stream, attempt):
            denied = _access_denied(response.username, self.peer_host, bool(response.auth_response))
            await self.stream.send(build_err(denied, self.capabilities))
            return False
        attributes = dict(response.attributes or ())
        try:
            outcome = await self._bind_session(response.username, response.database, attributes)
        except Exception as e:  # 1049 for an unknown database; anything else is logged
            await self.stream.send(self._error_payload(e))
            return False
        await self.stream.send(encode.ok_payload(outcome, self.capabilities))
        self.authenticated = True
        return True

    async def _bind_session(
        self, user: str, database: str | None, attributes: Mapping[str, str]
    ) -> Outcome:
        """Make the pre-authentication session the authenticated user's (1049 for an unknown
        database), with the capabilities the client and the server share."""
        session = self.session
        session.client_capabilities = self.capabilities
        session.connect_attrs = dict(attributes)
        session.host = self.peer_host
        return await session.change_user(user, database or None)

    # ----- command loop ---------------------------------------------------------------------------

    def _limit(self, variable: str, ceiling: float) -> float:
        """The session's value of a timeout or size variable, capped by the front-end's own
        limit (``SET SESSION wait_timeout = 5`` applies; nothing can raise the cap)."""
        try:
            value = float(str(self.session.get_variable(variable, global_scope=False)))
        except (Error, ValueError):
            return ceiling
        return min(value, ceiling) if value > 0 else ceiling

    async def _serve(self) -> None:
        config = self._host.config
        # mysqld fixes max_allowed_packet for a session when it connects.
        max_packet = self._limit("max_allowed_packet", config.max_allowed_packet)
        self.stream.max_payload = int(max_packet)
        idle_raw: object = None  # the session's wait_timeout that ``idle`` was computed from
        idle = config.wait_timeout
        while not self.closing:
            raw = self.session.vars.get("wait_timeout")
            if raw is None or raw != idle_raw:
                idle_raw = raw
                idle = self._limit("wait_timeout", config.wait_timeout)
            try:
                payload = await self.stream.read(idle, command=True)
            except TimeoutError:
                logger.info("connection %d: idle longer than wait_timeout", self.connection_id)
                await self._send_quietly(wire_error(ER.CLIENT_INTERACTION_TIMEOUT))
                return
            if not payload:
                raise RemoteProtocolError("empty command packet")
            handler = _DISPATCH.get(payload[0], Connection._unknown_command)
            self.busy = True
            try:
                keep_going = await handler(self, payload)
            finally:
                self.busy = False
            if not keep_going or self.session_gone:
                return

    def _error_payload(self, exc: BaseException) -> bytes:
        """ERR for an exception raised while answering a command."""
        if isinstance(exc, Error) and exc.errno is not None:
            err = ErrPacket(exc.errno, exc.sqlstate or _UNKNOWN_ERROR_SQLSTATE, exc.msg)
        else:
            logger.error("connection %d: internal error", self.connection_id, exc_info=exc)
            err = wire_error(ER.UNKNOWN_ERROR, f"{type(exc).__name__}: {exc}")
        return build_err(err, self.capabilities)

    async def _answer(self, work: Callable[[], Awaitable[list[bytes]]]) -> None:
        """Send what ``work`` returns, or an ERR if it fails.  Bytes that are not protocol
        (:class:`RemoteProtocolError`) still close the connection."""
        try:
            payloads = await work()
        except RemoteProtocolError:
            raise
        except Exception as e:
            payloads = [self._error_payload(e)]
        await self.stream.send(*payloads)

    def _plain_ok(self) -> list[bytes]:
        return [encode.ok_payload(self.session.ping(), self.capabilities)]

    # ----- commands -------------------------------------------------------------------------------

    async def _unknown_command(self, payload: bytes) -> bool:
        logger.debug("connection %d: unknown command 0x%02x", self.connection_id, payload[0])
        await self.stream.send(build_err(wire_error(ER.UNKNOWN_COM_ERROR), self.capabilities))
        return True

    async def _quit(self, payload: bytes) -> bool:
        return False

    async def _query(self, payload: bytes) -> bool:
        # Session.query's steps, run here rather than through its async generator (one
        # less object per command); the order of closing and answering is the same.
        # COM_QUERY without query attributes (not offered): the text follows the command.
        sql = payload[1:].decode("utf-8", "surrogateescape")
        session = self.session
        try:
            statements = session.begin_query(sql)
        except (RemoteProtocolError, OSError, TimeoutError):
            raise
        except Exception as e:
            await self.stream.send(self._error_payload(e))
            return True
        # Not try/finally, for the reason given in :meth:`run`.
        try:
            failure = await self._answer_statements(statements)
            if failure is not None:
                # A statement failed (the ones before it were answered): ERR ends the response.
                await self.stream.send(self._error_payload(failure))
        except BaseException as exc:
            await session.end_query()
            raise exc
        await session.end_query()
        return True

    async def _answer_statements(self, statements: list[Statement]) -> Exception | None:
        """Answer each statement in turn; the error that stopped them, if one did."""
        session = self.session
        try:
            last = len(statements) - 1
            for index, statement in enumerate(statements):
                try:
                    outcome = await session.answer(statement, more=index < last)
                except Exception:
                    await session.end_query()  # a killed session closes before the ERR
                    raise
                payloads = encode.encode_outcome(
                    outcome, self.capabilities, definitions=self._definitions
                )
                await self.stream.send(*payloads)
        except (RemoteProtocolError, OSError, TimeoutError):
            raise
        except Exception as e:
            return e
        return None

    async def _init_db(self, payload: bytes) -> bool:
        name = parse_init_db(payload)

        async def work() -> list[bytes]:
            return [encode.ok_payload(await self.session.init_db(name), self.capabilities)]

        await self._answer(work)
        return True

    async def _ping(self, payload: bytes) -> bool:
        async def work() -> list[bytes]:
            return self._plain_ok()

        await self._answer(work)
        return True

    async def _field_list(self, payload: bytes) -> bool:
        request = parse_field_list(payload)
        wildcard = decode_text(request.wildcard).rstrip("\x00")

        async def work() -> list[bytes]:
            columns = self.session.field_list(request.table, wildcard)
            done = Outcome(status=self.session.status())
            return encode.field_list_payloads(columns, done, self.capabilities)

        await self._answer(work)
        return True

    async def _process_kill(self, payload: bytes) -> bool:
        target = parse_process_kill(payload)

        async def work() -> list[bytes]:
            ok = self._plain_ok()  # answered even when the connection kills itself
            await self._host.server.kill(target, query_only=False)
            return ok

        await self._answer(work)
        return True

    async def _change_user(self, payload: bytes) -> bool:
        request = parse_change_user(payload, self.capabilities)
        plugin = request.auth_plugin_name or MYSQL_NATIVE_PASSWORD
        attempt = Attempt(
            request.username, plugin, request.auth_response, self._nonce, self.peer_host
        )
        async with asyncio.timeout(self._host.config.connect_timeout):
            accepted = await self._host.auth.authenticate(self.stream, attempt)
        if not accepted:
            # mysqld keeps the previous user when COM_CHANGE_USER fails.
            denied = _access_denied(request.username, self.peer_host, bool(request.auth_response))
            await self.stream.send(build_err(denied, self.capabilities))
            return True

        async def work() -> list[bytes]:
            outcome = await self.session.change_user(request.username, request.database or None)
            self._statements.clear()
            if request.attributes is not None:
                self.session.connect_attrs = dict(request.attributes)
            return [encode.ok_payload(outcome, self.capabilities)]

        await self._answer(work)
        return True

    async def _reset_connection(self, payload: bytes) -> bool:
        async def work() -> list[bytes]:
            outcome = await self.session.reset_connection()
            self._statements.clear()
            return [encode.ok_payload(outcome, self.capabilities)]

        await self._answer(work)
        return True

    async def _set_option(self, payload: bytes) -> bool:
        if len(payload) == 3 and int.from_bytes(payload[1:3], "little") not in _SET_OPTIONS:
            await self.stream.send(build_err(wire_error(ER.UNKNOWN_COM_ERROR), self.capabilities))
            return True
        option = parse_set_option(payload)
        if option is SetOption.MULTI_STATEMENTS_ON:
            self.capabilities |= Capability.MULTI_STATEMENTS
        else:
            self.capabilities &= ~Capability.MULTI_STATEMENTS
        self.session.client_capabilities = self.capabilities
        done = Outcome(status=self.session.status())
        # mysqld answers with an EOF packet (an OK with header 0xFE under DEPRECATE_EOF).
        await self.stream.send(encode.terminator_payload(done, self.capabilities))
        return True

    # ----- prepared statements --------------------------------------------------------------------

    async def _stmt_prepare(self, payload: bytes) -> bool:
        sql = decode_text(parse_stmt_prepare(payload))

        async def work() -> list[bytes]:
            prepared = self.session.prepare(sql)
            self._statements[prepared.stmt_id] = _Statement(prepared.param_count)
            return encode.prepare_payloads(prepared, self.session.status(), self.capabilities)

        await self._answer(work)
        return True

    async def _stmt_execute(self, payload: bytes) -> bool:
        stmt_id = execute_statement_id(payload)
        statement = self._statements.get(stmt_id)
        if statement is None:
            err = wire_error(ER.UNKNOWN_STMT_HANDLER, stmt_id, "mysqld_stmt_execute")
            await self.stream.send(build_err(err, self.capabilities))
            return True
        long_data = {i: bytes(b) for i, b in statement.long_data.items()}
        too_long = statement.long_data_size > self._host.config.max_allowed_packet
        statement.long_data.clear()
        statement.long_data_size = 0
        if too_long:
            await self.stream.send(
                build_err(wire_error(ER.NET_PACKET_TOO_LARGE), self.capabilities)
            )
            return True
        request = parse_execute(payload, statement.param_count, statement.types, long_data)
        statement.types = request.types

        async def work() -> list[bytes]:
            outcome = await self.session.execute_prepared(stmt_id, request.values)
            return encode.encode_outcome(
                outcome, self.capabilities, binary=True, definitions=self._definitions
            )

        await self._answer(work)
        return True

    async def _stmt_send_long_data(self, payload: bytes) -> bool:
        chunk = parse_stmt_send_long_data(payload)
        statement = self._statements.get(chunk.statement_id)
        # No answer, ever; mysqld reports problems at the next execute.
        if statement is not None and chunk.param_id < statement.param_count:
            buffer = statement.long_data.setdefault(chunk.param_id, bytearray())
            if statement.long_data_size + len(chunk.data) <= self._host.config.max_allowed_packet:
                buffer += chunk.data
            statement.long_data_size += len(chunk.data)
        return True

    async def _stmt_close(self, payload: bytes) -> bool:
        stmt_id = parse_stmt_close(payload)
        self._statements.pop(stmt_id, None)
        self.session.close_prepared(stmt_id)  # no answer
        return True

    async def _stmt_reset(self, payload: bytes) -> bool:
        stmt_id = parse_stmt_reset(payload)

        async def work() -> list[bytes]:
            self.session.reset_prepared(stmt_id)
            statement = self._statements.get(stmt_id)
            if statement is not None:
                statement.long_data.clear()
                statement.long_data_size = 0
            return self._plain_ok()

        await self._answer(work)
        return True

    async def _stmt_fetch(self, payload: bytes) -> bool:
        # Cursors are never opened (CURSOR_EXISTS is never set), so there is nothing to fetch.
        fetch = parse_stmt_fetch(payload)
        err = wire_error(ER.STMT_HAS_NO_OPEN_CURSOR, fetch.statement_id)
        await self.stream.send(build_err(err, self.capabilities))
        return True


_DISPATCH: Final[Mapping[int, _Handler]] = MappingProxyType(
    {
        Command.QUIT: Connection._quit,
        Command.INIT_DB: Connection._init_db,
        Command.QUERY: Connection._query,
        Command.FIELD_LIST: Connection._field_list,
        Command.PROCESS_KILL: Connection._process_kill,
        Command.PING: Connection._ping,
        Command.CHANGE_USER: Connection._change_user,
        Command.STMT_PREPARE: Connection._stmt_prepare,
        Command.STMT_EXECUTE: Connection._stmt_execute,
        Command.STMT_SEND_LONG_DATA: Connection._stmt_send_long_data,
        Command.STMT_CLOSE: Connection._stmt_close,
        Command.STMT_RESET: Connection._stmt_reset,
        Command.SET_OPTION: Connection._set_option,
        Command.STMT_FETCH: Connection._stmt_fetch,
        Command.RESET_CONNECTION: Connection._reset_connection,
    }
)
