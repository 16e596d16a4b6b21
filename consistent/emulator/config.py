"""Configuration of one emulated mysqld: identity, GTID settings, accounts, clock.

Everything a test or a topology wants to pin (the server UUID, whether the binary log is on,
the compression period of ``mysql.gtid_executed``) is a field of the frozen
:class:`ServerConfig`; the clock is passed separately so tests run in virtual time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

__all__ = [
    "DEFAULT_VERSION",
    "Account",
    "Clock",
    "GtidMode",
    "ServerConfig",
    "native_password_hash",
]

#: ``SELECT VERSION()`` of the emulator: a MySQL 8.0 version so clients pick their MySQL paths.
DEFAULT_VERSION = "8.0.36-consistent-emulator"

Clock = Callable[[], float]
"""Seconds since the epoch, like :func:`time.time`; injected so tests control time."""


class GtidMode(Enum):
    """``@@GLOBAL.gtid_mode`` values, in the order mysqld allows stepping through them.

    https://dev.mysql.com/doc/refman/8.0/en/replication-options-gtids.html#sysvar_gtid_mode
    """

    OFF = "OFF"
    OFF_PERMISSIVE = "OFF_PERMISSIVE"
    ON_PERMISSIVE = "ON_PERMISSIVE"
    ON = "ON"

    @property
    def assigns_gtids(self) -> bool:
        """Whether new transactions of this server get a GTID (otherwise they are anonymous)."""
        return self in (GtidMode.ON_PERMISSIVE, GtidMode.ON)

    @property
    def step(self) -> int:
        """Position in OFF < OFF_PERMISSIVE < ON_PERMISSIVE < ON."""
        return list(GtidMode).index(self)


def native_password_hash(password: str) -> str:
    """``mysql_native_password``'s stored form: ``*`` + upper hex of SHA1(SHA1(password))."""
    if not password:
        return ""
    inner = hashlib.sha1(password.encode()).digest()
    return "*" + hashlib.sha1(inner).hexdigest().upper()


@dataclass(frozen=True)
class Account:
    """A user the front-end can authenticate.  The plain password is kept so that
    ``caching_sha2_password`` (which needs it for its fast path) and ``mysql_native_password``
    (which needs :attr:`native_hash`) can both verify a login."""

    user: str
    password: str = ""
    host: str = "%"
    plugin: str = "caching_sha2_password"

    @property
    def native_hash(self) -> str:
        """The ``mysql.user.authentication_string`` mysql_native_password would store."""
        return native_password_hash(self.password)


def _default_accounts() -> tuple[Account, ...]:
    return (Account("root", ""),)


@dataclass(frozen=True)
class ServerConfig:
    """Static configuration of one emulated mysqld.

    ``system_variables`` overrides compiled-in defaults of global system variables (names in
    lowercase, values as their SQL text, like options in ``my.cnf``).
    """

    server_uuid: str = "00000000-1111-0000-1111-000000000000"
    server_id: int = 1
    gtid_mode: GtidMode = GtidMode.ON
    enforce_gtid_consistency: bool = True
    log_bin: bool = True
    log_bin_basename: str = "binlog"
    log_replica_updates: bool = True
    version: str = DEFAULT_VERSION
    version_comment: str = "MySQL Community Server - GPL (consistent emulator)"
    hostname: str = "localhost"
    port: int = 3306
    accounts: tuple[Account, ...] = field(default_factory=_default_accounts)
    gtid_executed_compression_period: int = 0
    system_time_zone: str = "UTC"
    max_binlog_transactions: int = 0
    """Rotate the binary log after this many transactions (0: only on FLUSH/restart)."""
    system_variables: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    data_dir: str | None = None
    """Directory for the SQLite data file; a private temporary directory when ``None``."""

    def account(self, user: str) -> Account | None:
        """The account named ``user``, if any."""
        for account in self.accounts:
            if account.user == user:
                return account
        return None
