"""A minimal blocking MySQL client for the proxy's tests, built on the codec only.

PyMySQL cannot send server-side prepared statements, ask for CLIENT_DEPRECATE_EOF or
CLIENT_SESSION_TRACK, or send arbitrary packets; this client can.  It reads whole responses with
its own simple rules (not the proxy's relay), so it is an independent check of what the proxy
sends: every packet's sequence id is verified.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

from consistent.protocol import (
    Capability,
    HandshakeResponse41,
    build_handshake_response41,
    parse_err,
    parse_handshake_v10,
    parse_ok,
    parse_text_row,
    scramble_native_password,
)
from consistent.protocol.binary import BinaryType, parse_binary_row
from consistent.protocol.resultset import parse_column_definition41

BASE_CAPS = (
    Capability.LONG_PASSWORD
    | Capability.LONG_FLAG
    | Capability.PROTOCOL_41
    | Capability.TRANSACTIONS
    | Capability.SECURE_CONNECTION
    | Capability.PLUGIN_AUTH
    | Capability.MULTI_RESULTS
    | Capability.MULTI_STATEMENTS
    | Capability.PS_MULTI_RESULTS
)


class ServerError(Exception):
    def __init__(self, errno: int, message: str) -> None:
        super().__init__(errno, message)
        self.errno = errno


@dataclass
class Result:
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[object, ...]] = field(default_factory=list)
    status: int = 0
    affected: int = 0
    session_state: tuple[object, ...] = ()


class RawClient:
    """Connects and logs in with mysql_native_password."""

    def __init__(
        self, port: int, user: str, password: str, *, caps: int = BASE_CAPS, database: str = ""
    ) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        self.seq = 0
        seq, payload = self.read()
        hello = parse_handshake_v10(payload)
        self.nonce = hello.auth_plugin_data
        self.connection_id = hello.connection_id
        self.server_caps = int(hello.capabilities)
        if database:
            caps |= Capability.CONNECT_WITH_DB
        self.caps = caps & self.server_caps
        response = HandshakeResponse41(
            capabilities=Capability(caps),
            username=user,
            auth_response=scramble_native_password(password.encode(), hello.auth_plugin_data),
            max_packet_size=1 << 24,
            charset=45,
            database=database or None,
            auth_plugin_name="mysql_native_password",
        )
        self.write(build_handshake_response41(response), seq + 1)
        _seq, reply = self.read()
        if reply[:1] == b"\xff":
            err = parse_err(reply, self.caps)
            raise ServerError(err.errno, err.message)
        assert reply[:1] == b"\x00", reply

    # ----------------------------------------------------------------- packets

    def write(self, payload: bytes, seq: int) -> None:
        self.sock.sendall(struct.pack("<I", len(payload) | seq << 24) + payload)
        self.seq = (seq + 1) & 0xFF

    def read(self) -> tuple[int, bytes]:
        while len(self.buf) < 4:
            self._recv()
        length = int.from_bytes(self.buf[:3], "little")
        seq = self.buf[3]
        while len(self.buf) < 4 + length:
            self._recv()
        payload = self.buf[4 : 4 + length]
        self.buf = self.buf[4 + length :]
        return seq, payload

    def _recv(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the proxy closed the connection")
        self.buf += data

    def expect(self) -> bytes:
        """The next packet of the current response, checking its sequence id."""
        seq, payload = self.read()
        assert seq == self.seq, f"sequence id {seq}, expected {self.seq}"
        self.seq = (seq + 1) & 0xFF
        return payload

    def command(self, payload: bytes) -> None:
        self.write(payload, 0)

    # ----------------------------------------------------------------- responses

    def _error(self, payload: bytes) -> ServerError:
        err = parse_err(payload, self.caps)
        return ServerError(err.errno, err.message)

    def result(self, binary: bool = False) -> list[Result]:
        """Every result of the current response (multi-results followed)."""
        results = []
        deprecate = bool(self.caps & Capability.DEPRECATE_EOF)
        while True:
            first = self.expect()
            if first[:1] == b"\xff":
                raise self._error(first)
            if first[:1] == b"\x00":
                ok = parse_ok(first, self.caps)
                results.append(
                    Result(
                        status=int(ok.status),
                        affected=ok.affected_rows,
                        session_state=ok.session_state,
                    )
                )
                if not ok.status & 0x08:
                    return results
                continue
            count = first[0]
            res = Result()
            types = []
            for _ in range(count):
                column = parse_column_definition41(self.expect(), self.caps)
                res.columns.append(column.name)
                types.append(BinaryType.of(column))
            if not deprecate:
                eof = self.expect()
                assert eof[:1] == b"\xfe", eof
                assert len(eof) < 9, eof
            while True:
                packet = self.expect()
                if packet[:1] == b"\xff":
                    raise self._error(packet)
                if packet[:1] == b"\xfe" and len(packet) < (0xFFFFFF if deprecate else 9):
                    if deprecate:
                        ok = parse_ok(packet, self.caps)
                        res.status = int(ok.status)
                        res.session_state = ok.session_state
                    else:
                        res.status = int.from_bytes(packet[3:5], "little")
                    break
                if binary:
                    res.rows.append(tuple(parse_binary_row(packet, types)))
                else:
                    res.rows.append(parse_text_row(packet, count))
            results.append(res)
            if not res.status & 0x08:
                return results

    def query(self, sql: str) -> list[Result]:
        self.command(b"\x03" + sql.encode())
        return self.result()

    def scalar(self, sql: str) -> object:
        return self.query(sql)[0].rows[0][0]

    def prepare(self, sql: str) -> tuple[int, int, int]:
        self.command(b"\x16" + sql.encode())
        first = self.expect()
        if first[:1] == b"\xff":
            raise self._error(first)
        stmt_id = int.from_bytes(first[1:5], "little")
        columns = int.from_bytes(first[5:7], "little")
        params = int.from_bytes(first[7:9], "little")
        deprecate = bool(self.caps & Capability.DEPRECATE_EOF)
        for count in (params, columns):
            for _ in range(count):
                self.expect()
            if count and not deprecate:
                assert self.expect()[:1] == b"\xfe"
        return stmt_id, params, columns

    def execute(self, stmt_id: int, params: list[int], *, bind: bool = True) -> list[Result]:
        body = b"\x17" + stmt_id.to_bytes(4, "little") + b"\x00" + (1).to_bytes(4, "little")
        if params:
            body += bytes((len(params) + 7) // 8)  # no NULLs
            if bind:
                body += b"\x01" + b"\x08\x00" * len(params)  # LONGLONG, signed
            else:
                body += b"\x00"
            body += b"".join(p.to_bytes(8, "little", signed=True) for p in params)
        self.command(body)
        return self.result(binary=True)

    def close_statement(self, stmt_id: int) -> None:
        self.command(b"\x19" + stmt_id.to_bytes(4, "little"))

    def close(self) -> None:
        try:
            self.command(b"\x01")
        finally:
            self.sock.close()


def long_data_packet(stmt_id: int, param: int, data: bytes) -> bytes:
    """COM_STMT_SEND_LONG_DATA (no response)."""
    return b"\x18" + stmt_id.to_bytes(4, "little") + param.to_bytes(2, "little") + data


def execute_packet(stmt_id: int, types: bytes, values: bytes, nparams: int) -> bytes:
    """COM_STMT_EXECUTE binding ``types`` (2 bytes per parameter) with ``values`` (binary)."""
    return (
        b"\x17"
        + stmt_id.to_bytes(4, "little")
        + b"\x00"
        + (1).to_bytes(4, "little")
        + bytes((nparams + 7) // 8)
        + b"\x01"
        + types
        + values
    )
