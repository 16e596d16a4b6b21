"""One exception hierarchy for the whole project, shaped after PEP 249.

Server errors keep ``args == (errno, message)`` and carry ``sqlstate``, exactly as PyMySQL's
do, because SQLAlchemy reads ``args[0]`` to recognise disconnects (1927, 2006, 2013, 2014, 2045,
2055, 4031).  Our own consistency errors therefore use errnos outside that list.

Every class is also a subclass of PyMySQL's class of the same name (``pymysql.err``), so
code written against PyMySQL (``except pymysql.err.IntegrityError``) keeps catching what the
wrapper raises; ``isinstance(e, consistent.errors.Error)`` still tells ours apart.

Protocol errors are split by blame, as h11 does: :class:`RemoteProtocolError` when the peer sent
bytes that do not parse, :class:`LocalProtocolError` when our own code asked for something the
protocol cannot express.
"""

from __future__ import annotations

import pymysql.err

from consistent.errnos import CONSISTENCY_TIMEOUT, ER

__all__ = [
    "ER_MALFORMED_GTID_SET_SPECIFICATION",
    "ER_MALFORMED_GTID_SPECIFICATION",
    "ConsistencyTimeout",
    "DataError",
    "DatabaseError",
    "Error",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "LocalProtocolError",
    "MalformedGtid",
    "MalformedGtidSet",
    "NotSupportedError",
    "OperationalError",
    "ProgrammingError",
    "ProtocolError",
    "RemoteProtocolError",
    "ReplayFailed",
    "Warning",
]

ER_MALFORMED_GTID_SET_SPECIFICATION = int(ER.MALFORMED_GTID_SET_SPECIFICATION)
ER_MALFORMED_GTID_SPECIFICATION = int(ER.MALFORMED_GTID_SPECIFICATION)

_GENERAL_SQLSTATE = "HY000"


class Warning(pymysql.err.Warning):  # PEP 249 requires this exact name
    """PEP 249 ``Warning``: important warnings such as data truncation."""


class Error(pymysql.err.Error):
    """Root of every exception raised by ``consistent`` (PEP 249 ``Error``).

    When the error comes from, or imitates, a server error, ``args`` is ``(errno, message)``
    and ``sqlstate`` holds the five-character SQLSTATE.
    """

    sqlstate: str | None = None

    def __init__(self, *args: object, sqlstate: str | None = None) -> None:
        # Not PyMySQL's ``__init__``, which always sets ``sqlstate`` on the instance: the
        # classes compiled with mypyc that derive from ours (``proxy.stream.ConnectionClosed``)
        # cannot take instance attributes they do not declare; the class attribute serves.
        Exception.__init__(self, *args)
        if sqlstate is not None:
            self.sqlstate = sqlstate

    @property
    def errno(self) -> int | None:
        """The MySQL error number, when the first argument is one."""
        first = self.args[0] if self.args else None
        return first if isinstance(first, int) else None

    @property
    def msg(self) -> str:
        """The human-readable message, without the errno."""
        if len(self.args) >= 2 and isinstance(self.args[0], int):
            return str(self.args[1])
        return str(self.args[0]) if self.args else ""


class InterfaceError(Error, pymysql.err.InterfaceError):
    """Misuse of the interface rather than a problem in the database."""


class DatabaseError(Error, pymysql.err.DatabaseError):
    """An error related to the database."""


class DataError(DatabaseError, pymysql.err.DataError):
    """Bad data: division by zero, value out of range, malformed values."""


class OperationalError(DatabaseError, pymysql.err.OperationalError):
    """The database's operation failed: lost connection, timeouts, server unavailable."""


class IntegrityError(DatabaseError, pymysql.err.IntegrityError):
    """Relational integrity is violated, for example a duplicate key."""


class InternalError(DatabaseError, pymysql.err.InternalError):
    """The database hit an internal error."""


class ProgrammingError(DatabaseError, pymysql.err.ProgrammingError):
    """Bad SQL, a missing table, a wrong number of parameters."""


class NotSupportedError(DatabaseError, pymysql.err.NotSupportedError):
    """A method or feature the database, or this middleware, does not support."""


class MalformedGtidSet(DataError):
    """Text that is not a GTID set; errno 1772 with mysqld's own message."""

    def __init__(self, text: str) -> None:
        super().__init__(
            ER_MALFORMED_GTID_SET_SPECIFICATION,
            f"Malformed GTID set specification '{text[:200]}'.",
            sqlstate=_GENERAL_SQLSTATE,
        )
        self.text = text


class MalformedGtid(DataError):
    """Text that is not a single GTID; errno 1774 with mysqld's own message."""

    def __init__(self, text: str) -> None:
        super().__init__(
            ER_MALFORMED_GTID_SPECIFICATION,
            f"Malformed GTID specification '{text[:200]}'.",
            sqlstate=_GENERAL_SQLSTATE,
        )
        self.text = text


class ConsistencyTimeout(OperationalError):
    """No replica caught up with the session's required set in time, and the configuration
    says to raise rather than fall back.  Deliberately not a disconnect errno."""

    def __init__(self, message: str) -> None:
        super().__init__(CONSISTENCY_TIMEOUT, message, sqlstate=_GENERAL_SQLSTATE)


class ProtocolError(InterfaceError):
    """The MySQL wire protocol was violated."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that are not valid protocol: close that connection."""


class LocalProtocolError(ProtocolError):
    """Our own code asked to build something the protocol cannot express."""


class ReplayFailed(Exception):
    """A session's replayable state could not be replayed on a server connection (a setting
    that server refuses).  Internal to the front ends, which catch it and let the policy decide
    (:meth:`~consistent.policy.session.SessionPolicy.on_replay_failed`); it never reaches the
    application, so it is not part of the PEP 249 hierarchy."""
