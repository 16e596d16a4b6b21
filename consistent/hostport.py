"""``host:port`` text: the one parser behind every form's server addresses.

Accepted spellings: ``host``, ``host:port``, ``[v6]`` and ``[v6]:port``.  Text with more than one
colon and no brackets is a bare IPv6 address with the default port.  Whether the host names a
real machine is for the caller to check (the wrapper checks host-name syntax, the proxy lets the
resolver decide).

:func:`split_host_port` raises :class:`~consistent.errors.InterfaceError`; each form wraps it in
its own error where it has one (the proxy's ``ConfigError``, an ``argparse`` error).
:func:`host_port_or_default` never raises, for names read back from traces.
"""

from __future__ import annotations

from typing import Final

from consistent.errors import InterfaceError

__all__ = ["DEFAULT_PORT", "MAX_PORT", "host_port_or_default", "join_host_port", "split_host_port"]

#: MySQL's and MariaDB's port.
DEFAULT_PORT: Final = 3306
MAX_PORT: Final = 65535


def split_host_port(
    text: str, default_port: int = DEFAULT_PORT, *, lowest_port: int = 1
) -> tuple[str, int]:
    """``(host, port)`` from ``text``; a port below ``lowest_port`` (0 for a listening address
    that lets the system choose) or above 65535 is refused."""
    value = text.strip()
    if value.startswith("["):
        host, closed, rest = value[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            raise InterfaceError(f"bad server address {text!r}")
        port = _port(rest[1:], text, lowest_port) if rest else default_port
    elif value.count(":") == 1:
        host, _, port_text = value.partition(":")
        port = _port(port_text, text, lowest_port)
    else:
        host, port = value, default_port
    if not host:
        raise InterfaceError(f"a server address needs a host: {text!r}")
    return host, port


def join_host_port(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets: what :func:`split_host_port` reads back."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def host_port_or_default(text: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """As :func:`split_host_port`, but text that does not parse is all host."""
    try:
        return split_host_port(text, default_port, lowest_port=0)
    except InterfaceError:
        return text.strip().strip("[]"), default_port


def _port(text: str, context: str, lowest: int) -> int:
    if not text.isdigit() or not text.isascii():
        raise InterfaceError(f"bad port in {context!r}")
    port = int(text)
    if not lowest <= port <= MAX_PORT:
        raise InterfaceError(f"port out of range in {context!r}")
    return port
