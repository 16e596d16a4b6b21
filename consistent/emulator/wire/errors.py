"""The errors only the front-end raises: protocol-level failures mysqld reports itself.

Statement errors come from the engine (:mod:`consistent.emulator.errors`); these are the ones
that concern packets, commands and connections.

https://dev.mysql.com/doc/mysql-errors/8.0/en/server-error-reference.html
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from consistent.errnos import ER
from consistent.errors import InterfaceError, RemoteProtocolError
from consistent.protocol.responses import ErrPacket

__all__ = [
    "WIRE_ERRORS",
    "PacketTooLarge",
    "PacketsOutOfOrder",
    "PeerClosed",
    "wire_error",
]


class PeerClosed(InterfaceError):
    """The client closed the connection between two packets (not an error of the client)."""


class PacketTooLarge(RemoteProtocolError):
    """The client announced a packet longer than ``max_allowed_packet`` (ERR 1153).
    ``unread`` is how many bytes of it are still on their way."""

    def __init__(self, message: str, unread: int) -> None:
        super().__init__(message)
        self.unread = unread


class PacketsOutOfOrder(RemoteProtocolError):
    """A packet arrived with an unexpected sequence id (ERR 1156)."""


@dataclass(frozen=True, slots=True)
class _Spec:
    sqlstate: str
    template: str


WIRE_ERRORS: Final = MappingProxyType(
    {
        ER.HANDSHAKE_ERROR: _Spec("08S01", "Bad handshake"),
        ER.UNKNOWN_COM_ERROR: _Spec("08S01", "Unknown command"),
        ER.SERVER_SHUTDOWN: _Spec("08S01", "Server shutdown in progress"),
        ER.UNKNOWN_ERROR: _Spec("HY000", "%s"),
        ER.NET_PACKET_TOO_LARGE: _Spec(
            "08S01", "Got a packet bigger than 'max_allowed_packet' bytes"
        ),
        ER.NET_PACKETS_OUT_OF_ORDER: _Spec("08S01", "Got packets out of order"),
        ER.UNKNOWN_STMT_HANDLER: _Spec(
            "HY000", "Unknown prepared statement handler (%s) given to %s"
        ),
        ER.STMT_HAS_NO_OPEN_CURSOR: _Spec("HY000", "The statement (%s) has no open cursor."),
        ER.CLIENT_INTERACTION_TIMEOUT: _Spec(
            "HY000",
            "The client was disconnected by the server because of inactivity. See wait_timeout "
            "and interactive_timeout for configuring this behavior.",
        ),
    }
)


def wire_error(code: ER, *args: object) -> ErrPacket:
    """The ERR packet for ``code``, its message formatted from ``args``."""
    spec = WIRE_ERRORS[code]
    message = spec.template % args if args else spec.template
    return ErrPacket(int(code), spec.sqlstate, message)
