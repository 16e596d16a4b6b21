"""Settings of the wire front-end: timeouts and limits, mysqld's names and defaults.

The emulated server's own configuration (version, accounts, GTID settings) lives in
:class:`~consistent.emulator.config.ServerConfig`; this is only what the socket side needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from consistent.protocol.framing import DEFAULT_MAX_PAYLOAD

__all__ = ["WireConfig"]


@dataclass(frozen=True, slots=True)
class WireConfig:
    """Limits and timeouts of the front-end, in seconds and bytes.

    The defaults are mysqld 8.0's: ``connect_timeout`` bounds the whole login exchange,
    ``wait_timeout`` an idle connection between commands, ``net_read_timeout`` the rest of a
    packet once its header arrived, ``net_write_timeout`` each flush to the client, and
    ``max_allowed_packet`` one command packet (continuation packets included).  The session's
    ``wait_timeout`` and ``max_allowed_packet`` system variables can lower the last two, never
    raise them.
    ``shutdown_timeout`` is how long :meth:`WireServer.wait_closed` lets running commands finish
    before it cancels them.  ``rsa_private_key_pem`` pins the key ``caching_sha2_password``
    uses for full authentication; ``None`` generates one per server at start.
    """

    connect_timeout: float = 10.0
    wait_timeout: float = 28800.0
    net_read_timeout: float = 30.0
    net_write_timeout: float = 60.0
    max_allowed_packet: int = DEFAULT_MAX_PAYLOAD
    shutdown_timeout: float = 5.0
    rsa_key_bits: int = 2048
    rsa_private_key_pem: bytes | None = None
