"""The proxy's own exceptions, in a module that is never compiled.

They derive from :mod:`consistent.errors`, whose classes also derive from PyMySQL's: a class
compiled with mypyc cannot derive safely from such a hierarchy (several Python bases), so the
compiled modules (``stream``, ``backends``, the session's parts) raise these and never declare
exceptions.  :class:`ReplayFailed` and :class:`Broken` never leave a session: they carry a
slow-path step's failure to the code that answers the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from consistent.errors import Error, InterfaceError, ReplayFailed

if TYPE_CHECKING:
    from proxy.handshake import BackendLoginError

__all__ = [
    "BackendUnavailable",
    "Broken",
    "ConnectionClosed",
    "PoolExhausted",
    "ReplayFailed",
    "WritesRefused",
]


class ConnectionClosed(InterfaceError):
    """The peer closed the connection (or it was lost) before the expected packet arrived."""


class BackendUnavailable(Error):
    """A backend connection could not be opened (refused, timed out, login refused)."""

    def __init__(self, name: str, reason: str, *, login_error: BackendLoginError | None = None):
        super().__init__(f"cannot connect to {name}: {reason}")
        self.server = name
        self.reason = reason
        #: The server's own refusal (errno and message worth showing the client).
        self.login_error = login_error


class WritesRefused(BackendUnavailable):
    """Nothing goes to the primary while two servers accept writes (``on_split_brain =
    "refuse"``); the client gets 1290, as from a read-only server."""


class PoolExhausted(BackendUnavailable):
    """Every connection of a pool was in use for the whole wait (the client gets 1040)."""

    def __init__(self, pool: str, size: int, wait: float) -> None:
        super().__init__(
            pool,
            f"Too many connections: pool {pool} is exhausted ({size} connections in use, "
            f"waited {wait:g} s)",
        )
        self.pool = pool


class Broken(Exception):
    """The session cannot go on (primary lost with state only it had)."""
