"""Configuration of one emulated mysqld: identity, version, GTID settings, accounts, clock.

Everything a test or a topology wants to pin (the server UUID, the MySQL version, whether the
binary log is on, the compression period of ``mysql.gtid_executed``) is a field of the frozen
:class:`ServerConfig`; the clock is passed separately so tests run in virtual time.

The version decides behaviour that changed between releases (:class:`ServerConfig` properties):
tagged GTIDs from 8.3 (:data:`VERSION_84`), ``mysql.gtid_executed`` written at every commit
from 8.0.17 (before: at binary log rotation and shutdown), ``RESET MASTER`` gone in 8.4, and
no commit timestamps before 8.0.1 (a 5.7 version makes a source without them).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

__all__ = [
    "DEFAULT_VERSION",
    "VERSION_57",
    "VERSION_80",
    "VERSION_84",
    "Account",
    "Clock",
    "GtidMode",
    "ServerConfig",
    "emulated_version",
    "native_password_hash",
    "version_number",
]

#: ``SELECT VERSION()`` of the emulator: a MySQL 8.0 version so clients pick their MySQL paths.
DEFAULT_VERSION = "8.0.36-consistent-emulator"
VERSION_80 = DEFAULT_VERSION
#: MySQL 8.4 LTS: tagged GTIDs, ``mysql.gtid_executed`` with ``gtid_tag``, no RESET MASTER.
VERSION_84 = "8.4.3-consistent-emulator"
#: A 5.7 source: its transactions carry no commit timestamps (for delayed replication).
VERSION_57 = "5.7.44-consistent-emulator"


_SHORT_VERSIONS = {"5.7": VERSION_57, "8.0": VERSION_80, "8.4": VERSION_84}


def emulated_version(text: str) -> str:
    """A version as configured (``"8.4"``, ``"8.0.16"``, or a whole version string) as
    ``SELECT VERSION()`` returns it."""
    text = text.strip()
    if text in _SHORT_VERSIONS:
        return _SHORT_VERSIONS[text]
    return text if "-" in text else f"{text}-consistent-emulator"


@functools.lru_cache(maxsize=64)
def version_number(version: str) -> int:
    """``8.0.36-…`` → 80036, as ``do_server_version_int`` computes it (remembered: the
    version decides rules that statements such as ``SET GTID_NEXT`` look up each time)."""
    digits = version.split("-", 1)[0].split(".")
    parts = [int(p) if p.isdigit() else 0 for p in [*digits, "0", "0", "0"][:3]]
    return parts[0] * 10000 + parts[1] * 100 + parts[2]


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

    @property
    def version_id(self) -> int:
        """The version as a number (``80036``)."""
        return version_number(self.version)

    @property
    def gtid_tags(self) -> bool:
        """Whether GTIDs may carry tags (``uuid:tag:gno``): from 8.3."""
        return self.version_id >= 80300

    @property
    def gtids_saved_at_commit(self) -> bool:
        """Whether each transaction writes its GTID to ``mysql.gtid_executed`` at commit also
        with the binary log on (InnoDB's GTID persister, from 8.0.17)."""
        return self.version_id >= 80017

    @property
    def commit_timestamps(self) -> bool:
        """Whether transactions carry commit timestamps (WL#7319, from 8.0.1)."""
        return self.version_id >= 80001

    @property
    def reset_master(self) -> bool:
        """Whether ``RESET MASTER`` exists (removed in 8.4 for ``RESET BINARY LOGS AND
        GTIDS``, which 8.0 lacks before 8.2)."""
        return self.version_id < 80400

    def account(self, user: str) -> Account | None:
        """The account named ``user``, if any."""
        for account in self.accounts:
            if account.user == user:
                return account
        return None
