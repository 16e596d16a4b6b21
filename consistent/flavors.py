"""MySQL and MariaDB behind one interface: tracking, waiting, executed state, coverage.

The two servers expose the same primitive in different words (DESIGN.md, "Flavours"; reference
§1.7, §3.4):

==================  ==============================================  ================================
                    MySQL 5.7 / 8.x                                 MariaDB 10.x
==================  ==============================================  ================================
session's GTIDs     OK packet block 3, ``session_track_gtids``      block 0, variable ``last_gtid``
wait on a replica   ``WAIT_FOR_EXECUTED_GTID_SET``: 0 done, 1 late  ``MASTER_GTID_WAIT``: 0 / -1
executed state      ``@@GLOBAL.gtid_executed``                      ``gtid_slave_pos`` (replica),
                                                                    ``gtid_binlog_pos`` (primary)
covered?            set inclusion                                   per domain, seq_no >=
==================  ==============================================  ================================

The GTID algebra (merge, cover, what is missing) is the same for both and lives in
:mod:`consistent.policy.states`; the words both speak (:class:`~consistent.vocabulary.Tracking`,
:class:`~consistent.vocabulary.WaitOutcome`) in :mod:`consistent.vocabulary`.  A flavour owns
what differs by server: the statements, the tracker each level can have, what the wait
function's value means, and the text of a server's state.  Wait
statements are always rendered from a parsed state, never from text a user supplied, and the
rendered text is checked against the only characters a GTID can contain before it is quoted.

https://dev.mysql.com/doc/refman/8.0/en/gtid-functions.html
https://mariadb.com/kb/en/master_gtid_wait/
https://mariadb.com/kb/en/gtid/
"""

from __future__ import annotations

import enum
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType
from typing import ClassVar, Final

from consistent.errors import (
    InterfaceError,
    LocalProtocolError,
    MalformedGtid,
    MalformedGtidSet,
    NotSupportedError,
    RemoteProtocolError,
)
from consistent.gtid import GtidSet, GtidState, MariaGtid, MariaPosition, gtid_tags_in
from consistent.hostport import join_host_port
from consistent.policy import states
from consistent.protocol import OkPacket, SessionStateChange
from consistent.protocol.session_state import (
    MARIADB_GTIDS,
    MARIADB_LAST_GTID,
    MYSQL_GTIDS,
    gtid_text,
)
from consistent.vocabulary import FlavorName, Tracking, WaitOutcome

__all__ = [
    "MARIADB",
    "MYSQL",
    "MYSQL_UNTAGGED",
    "Flavor",
    "MariaDBFlavor",
    "MySQLFlavor",
    "ServerRole",
    "WriteProtection",
    "detect_flavor",
    "flavor_by_name",
    "server_flavor",
]

# Every character a rendered GTID set or position can contain (uuid, tag, numbers, separators).
_GTID_TEXT = re.compile(r"[0-9A-Za-z_:,\-]*")
# A name in session_track_system_variables: a variable name, or '*' for all of them.
_TRACKED_NAME = re.compile(r"\*|[A-Za-z_][A-Za-z0-9_]*")
_INTEGER = re.compile(r"[+-]?[0-9]+")
# MySQL's WAIT_FOR_EXECUTED_GTID_SET treats a timeout of 0 as "forever"; "do not wait" is
# therefore sent as the smallest positive timeout the rendering keeps.
_MYSQL_SHORTEST_TIMEOUT: Final = "0.000001"


class ServerRole(enum.Enum):
    """Whether a server is the primary or a replica (MariaDB reads its state differently)."""

    PRIMARY = "primary"
    REPLICA = "replica"


class Flavor(ABC):
    """One server family's way of tracking, waiting for and comparing GTIDs."""

    name: ClassVar[FlavorName]
    #: Whether the server's GTIDs may carry tags (MySQL 8.3+; MariaDB's positions read the
    #: same either way).
    gtid_tags: bool
    supported_modes: ClassVar[frozenset[Tracking]]
    _state_type: ClassVar[type[GtidSet] | type[MariaPosition]]
    _wait_results: ClassVar[Mapping[int, WaitOutcome]]

    # --- the state's text (the algebra is consistent.policy.states) -----------------------------

    def empty_state(self) -> GtidState:
        """The state that requires nothing."""
        return states.empty_state(self.name)

    def parse_state(self, text: str) -> GtidState:
        """Parse a state's text (a consistency token, a server variable).

        Raises :class:`~consistent.errors.MalformedGtidSet` for text that is not one.
        """
        return states.parse_state(text, self.name, tags=self.gtid_tags)

    def format_state(self, state: GtidState) -> str:
        """The state's canonical one-line text; :meth:`parse_state` reads it back."""
        if not isinstance(state, self._state_type):
            raise InterfaceError(
                f"the {self.name} flavour needs a {self._state_type.__name__}, not {state!r}"
            )
        return states.format_state(state)

    # --- session tracking -------------------------------------------------------------------------

    def tracker(self, tracking: Tracking) -> Tracking:
        """The tracker a primary connection runs when the level asks for ``tracking``: the
        same where the server has it, else :attr:`Tracking.OWN` (MariaDB's ``last_gtid``, which
        is all ``read_all_writes`` needs there: see :mod:`consistent.policy.acknowledged`)."""
        return tracking if tracking in self.supported_modes else Tracking.OWN

    @abstractmethod
    def tracking_probe(self) -> str | None:
        """A statement whose single value :meth:`tracking_statement` needs, or ``None``."""

    @abstractmethod
    def tracking_statement(self, mode: Tracking, current: object = None) -> str | None:
        """The statement that makes OK packets report the session's GTIDs in ``mode``.

        ``current`` is the value :meth:`tracking_probe` returned (text, bytes, or a value a
        driver gave), when the flavour needs one.  ``None`` means tracking is already on and
        nothing needs to be sent.
        """

    def replica_tracking_statement(self) -> str | None:
        """The statement that makes a replica connection's OK packets report the replica's
        executed state (MySQL's ``ALL_GTIDS``, feeding the replica knowledge), or ``None``
        where the server has no such tracker (MariaDB)."""
        if Tracking.ALL not in self.supported_modes:
            return None
        return self.tracking_statement(Tracking.ALL)

    def gtids_from_ok(self, ok: OkPacket) -> GtidState | None:
        """The GTIDs a parsed OK packet reports, or ``None`` when it reports none."""
        return self.gtids_from_session_state(ok.session_state)

    @abstractmethod
    def gtids_from_session_state(self, blocks: Iterable[SessionStateChange]) -> GtidState | None:
        """The GTIDs in an OK packet's session-state blocks, or ``None``; repeated blocks
        count together (:func:`consistent.protocol.session_state.gtid_text`).

        Text that is not a GTID state raises :class:`~consistent.errors.RemoteProtocolError`:
        the server sent something impossible.
        """

    # --- waiting ------------------------------------------------------------------------------

    @abstractmethod
    def wait_statement(self, state: GtidState, timeout: float) -> str:
        """``SELECT`` of the wait function for ``state``, giving up after ``timeout`` seconds
        (0 means: only check, do not wait).  Its single value goes to :meth:`wait_outcome`."""

    def wait_outcome(self, value: object) -> WaitOutcome:
        """The policy's outcome for the wait function's value (int, text or bytes, as a driver
        returns it).  NULL (the function declined to wait: MySQL inside a replication applier,
        MariaDB given NULL) and a value the function cannot return tell nothing about the
        replica: :attr:`WaitOutcome.ERROR`."""
        number = _as_int(value) if value is not None else None
        if number is None:
            return WaitOutcome.ERROR
        return self._wait_results.get(number, WaitOutcome.ERROR)

    # --- a server's executed state ---------------------------------------------------------

    @abstractmethod
    def executed_state_statement(self, role: ServerRole) -> str:
        """``SELECT`` of the variable holding what a server in ``role`` has executed."""

    def parse_executed(self, value: object) -> GtidState:
        """Parse the value :meth:`executed_state_statement` returned (text, bytes, or a value
        a driver gave).

        Text that is not a state raises :class:`~consistent.errors.RemoteProtocolError`.
        """
        raw = _raw(value)
        if raw is None:
            return self.empty_state()
        text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else raw
        try:
            return self.parse_state(text.strip())
        except (MalformedGtidSet, MalformedGtid) as exc:
            raise RemoteProtocolError(
                f"{self.name} executed state is not a GTID state: {exc.msg}"
            ) from exc

    # --- whether a server accepts writes --------------------------------------------------

    @abstractmethod
    def read_only_statement(self) -> str:
        """``SELECT`` of the variables that keep a server from accepting writes."""

    def executed_and_read_only_statement(self, role: ServerRole) -> str:
        """One ``SELECT`` of :meth:`executed_state_statement`'s column then
        :meth:`read_only_statement`'s: a monitor learns both in one round trip."""
        read_only = self.read_only_statement().removeprefix("SELECT ")
        return f"{self.executed_state_statement(role)}, {read_only}"

    def replication_sources_statement(self) -> str:
        """The statement listing the server's replication channels (one row per channel)."""
        return "SHOW REPLICA STATUS"

    def replica_hosts_statement(self) -> str:
        """The statement with which a source lists the replicas connected to it (those that
        set ``report_host``)."""
        return "SHOW REPLICAS"

    def parse_replica_hosts(
        self, columns: Sequence[str], rows: Sequence[Sequence[object]]
    ) -> frozenset[str]:
        """The ``host:port`` of each replica in the answer to
        :meth:`replica_hosts_statement` (one without a reported host is left out)."""
        index = {name.lower(): i for i, name in enumerate(columns)}
        if "host" not in index or "port" not in index:
            raise RemoteProtocolError("no Host or Port column in the list of replicas")
        host, port = index["host"], index["port"]
        found = set()
        for row in rows:
            name, number = _text(row[host]).strip(), _text(row[port]).strip()
            if name and number.isdigit() and 0 < int(number) < 65536:
                found.add(join_host_port(name, int(number)))
        return frozenset(found)

    # --- GTIDs a failover lost -----------------------------------------------------------------

    @abstractmethod
    def history_statement(self) -> str:
        """``SELECT`` of what a server has of the replication history (one row), for
        :meth:`missing_gtids`."""

    @abstractmethod
    def missing_gtids(self, required: GtidState, row: Sequence[object]) -> str | None:
        """The GTIDs of ``required`` that the server whose :meth:`history_statement` answered
        ``row`` never had (their text), or ``None``: what a failover to that server lost."""

    def diverged(self, executed: GtidState, row: Sequence[object]) -> str | None:
        """The GTIDs a replica executed (``executed``) that the primary whose
        :meth:`history_statement` answered ``row`` never had, when they make the replica's
        state say it has what it has not (``None``: it cannot mislead)."""
        return None

    def parse_replication_sources(
        self, columns: Sequence[str], rows: Sequence[Sequence[object]]
    ) -> frozenset[str]:
        """The ``host:port`` of each source the server replicates from, out of the answer to
        :meth:`replication_sources_statement`: the channels whose receiver or applier runs
        (a channel stopped for good, as on a promoted replica, is no source).  MySQL names
        the columns ``Source_*`` / ``Replica_*`` (8.0.22 on), MariaDB ``Master_*`` /
        ``Slave_*``."""
        index = {name.lower(): i for i, name in enumerate(columns)}

        def column(*names: str) -> int:
            for name in names:
                if name in index:
                    return index[name]
            raise RemoteProtocolError(f"no column {names[0]!r} in the replication status")

        host = column("source_host", "master_host")
        port = column("source_port", "master_port")
        io = column("replica_io_running", "slave_io_running")
        sql = column("replica_sql_running", "slave_sql_running")
        sources = set()
        for row in rows:
            running = {_text(row[io]).lower(), _text(row[sql]).lower()}
            if running & {"yes", "connecting"} and row[host]:
                sources.add(f"{_text(row[host])}:{_text(row[port])}")
        return frozenset(sources)

    def parse_read_only(self, row: Sequence[object]) -> WriteProtection:
        """The answer to :meth:`read_only_statement` (one row).  A value that is not plainly
        off counts as on (MariaDB 11.x gives ``read_only`` values such as ``NO_LOCK``)."""
        if not row:
            raise RemoteProtocolError(f"{self.name} answered no row for the read-only state")
        super_read_only = _switched_on(row[1]) if len(row) > 1 else None
        return WriteProtection(_switched_on(row[0]), super_read_only)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


@dataclass(frozen=True, slots=True)
class WriteProtection:
    """A server's ``@@read_only``, and ``@@super_read_only`` where it exists (MySQL; MariaDB
    has ``read_only`` only).  A replica with ``read_only`` off accepts a write sent to it by
    mistake; one with it on refuses it (1290), except from accounts that may bypass it."""

    read_only: bool
    super_read_only: bool | None = None

    @property
    def writable(self) -> bool:
        """True when ordinary accounts may write."""
        return not self.read_only


@dataclass(frozen=True, repr=False)
class MySQLFlavor(Flavor):
    """MySQL 5.7 / 8.x: GTID sets, ``session_track_gtids``, ``WAIT_FOR_EXECUTED_GTID_SET``.

    ``gtid_tags`` is the GTID syntax of the server: tagged GTIDs exist from 8.3 on, and a
    server before 8.3 never sends one, so its text is read with 8.0's grammar
    (:func:`detect_flavor` chooses from the handshake's version).
    """

    gtid_tags: bool = True

    name: ClassVar[FlavorName] = "mysql"
    supported_modes: ClassVar[frozenset[Tracking]] = frozenset(Tracking)
    _state_type: ClassVar[type[GtidSet]] = GtidSet
    # https://dev.mysql.com/doc/refman/8.0/en/gtid-functions.html#function_wait-for-executed-gtid-set
    _wait_results: ClassVar[Mapping[int, WaitOutcome]] = MappingProxyType(
        {
            0: WaitOutcome.REACHED,
            1: WaitOutcome.TIMED_OUT,
        }
    )
    # https://dev.mysql.com/doc/refman/8.0/en/server-system-variables.html#sysvar_session_track_gtids
    _trackers: ClassVar[Mapping[Tracking, str]] = MappingProxyType(
        {
            Tracking.OWN: "OWN_GTID",
            Tracking.ALL: "ALL_GTIDS",
        }
    )

    def tracking_probe(self) -> str | None:
        return None

    def tracking_statement(self, mode: Tracking, current: object = None) -> str:
        # One of two fixed keywords, never caller text.
        return f"SET SESSION session_track_gtids = {self._trackers[Tracking(mode)]}"

    def gtids_from_session_state(self, blocks: Iterable[SessionStateChange]) -> GtidSet | None:
        text = gtid_text(blocks, MYSQL_GTIDS)
        if text is None:
            return None
        try:
            return GtidSet.parse(text, tags=self.gtid_tags)
        except MalformedGtidSet as exc:
            raise RemoteProtocolError(f"GTIDS block is not a GTID set: {exc.msg}") from exc

    def wait_statement(self, state: GtidState, timeout: float) -> str:
        seconds = _render_timeout(timeout)
        if seconds == "0":
            seconds = _MYSQL_SHORTEST_TIMEOUT
        literal = _quote_gtid_text(self.format_state(state))
        return f"SELECT WAIT_FOR_EXECUTED_GTID_SET({literal}, {seconds})"

    def executed_state_statement(self, role: ServerRole) -> str:
        ServerRole(role)
        return "SELECT @@GLOBAL.gtid_executed"

    def read_only_statement(self) -> str:
        return "SELECT @@GLOBAL.read_only, @@GLOBAL.super_read_only"

    def history_statement(self) -> str:
        return "SELECT @@GLOBAL.gtid_executed"

    def missing_gtids(self, required: GtidState, row: Sequence[object]) -> str | None:
        """GTID sets are exact: what ``required`` holds beyond ``gtid_executed``."""
        if not isinstance(required, GtidSet) or not row:
            return None
        missing = states.missing(required, self.parse_state(_text(row[0]).strip()))
        return str(missing) if missing else None


@dataclass(frozen=True, repr=False)
class MariaDBFlavor(Flavor):
    """MariaDB 10.x: ``domain-server-seq`` positions, ``last_gtid``, ``MASTER_GTID_WAIT``."""

    name: ClassVar[FlavorName] = "mariadb"
    gtid_tags: bool = field(default=True, init=False)
    # last_gtid is the session's own GTID; MariaDB has no tracker for the whole executed set.
    supported_modes: ClassVar[frozenset[Tracking]] = frozenset({Tracking.OWN})
    _state_type: ClassVar[type[MariaPosition]] = MariaPosition
    # https://mariadb.com/kb/en/master_gtid_wait/
    _wait_results: ClassVar[Mapping[int, WaitOutcome]] = MappingProxyType(
        {
            0: WaitOutcome.REACHED,
            -1: WaitOutcome.TIMED_OUT,
        }
    )
    _executed_variables: ClassVar[Mapping[ServerRole, str]] = MappingProxyType(
        {
            ServerRole.PRIMARY: "gtid_binlog_pos",
            ServerRole.REPLICA: "gtid_slave_pos",
        }
    )

    def tracking_probe(self) -> str:
        return "SELECT @@SESSION.session_track_system_variables"

    def tracking_statement(self, mode: Tracking, current: object = None) -> str | None:
        if Tracking(mode) not in self.supported_modes:
            raise NotSupportedError(
                f"MariaDB cannot track {mode.value} GTIDs: it reports only the session's last_gtid"
            )
        current = _raw(current)
        if current is None:
            raise InterfaceError(
                "MariaDB tracking keeps what is already tracked: pass the value of "
                "tracking_probe() as 'current'"
            )
        names = _tracked_names(current)
        if "*" in names or MARIADB_LAST_GTID in (name.lower() for name in names):
            return None
        listed = ",".join([*names, MARIADB_LAST_GTID])
        return f"SET SESSION session_track_system_variables = '{listed}'"

    def gtids_from_session_state(
        self, blocks: Iterable[SessionStateChange]
    ) -> MariaPosition | None:
        text = gtid_text(blocks, MARIADB_GTIDS)
        if text is None:
            return None
        try:
            return MariaPosition.parse(text)
        except MalformedGtidSet as exc:
            raise RemoteProtocolError(f"last_gtid is not a GTID position: {exc.msg}") from exc

    def wait_statement(self, state: GtidState, timeout: float) -> str:
        seconds = _render_timeout(timeout)
        literal = _quote_gtid_text(self.format_state(state))
        return f"SELECT MASTER_GTID_WAIT({literal}, {seconds})"

    def executed_state_statement(self, role: ServerRole) -> str:
        return f"SELECT @@GLOBAL.{self._executed_variables[ServerRole(role)]}"

    def read_only_statement(self) -> str:
        return "SELECT @@GLOBAL.read_only"

    def history_statement(self) -> str:
        # https://mariadb.com/kb/en/gtid/#gtid_binlog_state: the last GTID of every
        # (domain, server id) in the binary logs; gtid_slave_pos: the last one applied by
        # replication per domain (without log_slave_updates the binary logs lack those).
        return "SELECT @@GLOBAL.gtid_binlog_state, @@GLOBAL.gtid_slave_pos, @@GLOBAL.server_id"

    def missing_gtids(self, required: GtidState, row: Sequence[object]) -> str | None:
        """A position compares sequence numbers per domain, so a new primary that writes on
        in a domain "covers" the GTIDs its old primary acknowledged and it never received.
        The server ids tell them apart: ``d-s-n`` is missing when the server's last GTID from
        server ``s`` in domain ``d`` is below ``n``; when it has none from ``s``, when its
        replicated position in ``d`` is below ``n`` (the history it shares with ``s``).  Its
        own GTIDs (the third column, its server id) it has by definition."""
        if not isinstance(required, MariaPosition) or not row:
            return None
        own = int(_text(row[2])) if len(row) > 2 and _text(row[2]).isdigit() else None
        last: dict[tuple[int, int], int] = {}
        replicated: dict[int, int] = {}
        for index, value in enumerate(row[:2]):
            for item in _text(value).split(","):
                if not item.strip():
                    continue
                gtid = MariaGtid.parse(item.strip())
                key = (gtid.domain, gtid.server_id)
                last[key] = max(last.get(key, -1), gtid.seq_no)
                if index == 1:
                    replicated[gtid.domain] = gtid.seq_no
        missing = []
        for gtid in required:
            if gtid.server_id == own:
                continue
            have = last.get((gtid.domain, gtid.server_id))
            if have is None:
                have = replicated.get(gtid.domain, -1)
            if have < gtid.seq_no:
                missing.append(str(gtid))
        return ",".join(missing) or None

    def diverged(self, executed: GtidState, row: Sequence[object]) -> str | None:
        """A replica that applied GTIDs its new primary never had (its old primary's last
        writes, lost by the failover) is on another history: its position compares sequence
        numbers, so it would pass for having the new primary's GTIDs of the same numbers, and
        ``MASTER_GTID_WAIT`` would return at once."""
        return self.missing_gtids(executed, row)

    def replication_sources_statement(self) -> str:
        # https://mariadb.com/kb/en/show-replica-status/ (every named connection)
        return "SHOW ALL SLAVES STATUS"

    def replica_hosts_statement(self) -> str:
        # https://mariadb.com/kb/en/show-replica-hosts/
        return "SHOW SLAVE HOSTS"


MYSQL: Final = MySQLFlavor()
#: MySQL before 8.3 (5.7, 8.0): GTIDs without tags.
MYSQL_UNTAGGED: Final = MySQLFlavor(gtid_tags=False)
MARIADB: Final = MariaDBFlavor()

_BY_NAME: Final[Mapping[str, Flavor]] = MappingProxyType({MYSQL.name: MYSQL, MARIADB.name: MARIADB})


def detect_flavor(server_version: str | bytes) -> Flavor:
    """The flavour of a server from its handshake's version string.

    MariaDB's contain ``MariaDB``, also in the ``5.5.5-10.11.6-MariaDB`` form that MariaDB
    sends to stay compatible with old clients; everything else is taken for MySQL, whose GTID
    syntax follows the version (tags from 8.3, :data:`MYSQL_UNTAGGED` before).
    """
    text = (
        server_version.decode("utf-8", "replace")
        if isinstance(server_version, bytes)
        else server_version
    )
    if "mariadb" in text.lower():
        return MARIADB
    return MYSQL if gtid_tags_in(text) else MYSQL_UNTAGGED


def flavor_by_name(name: str) -> Flavor:
    """The flavour a configuration names: ``"mysql"`` or ``"mariadb"`` (any case)."""
    flavor = _BY_NAME.get(name.strip().lower())
    if flavor is None:
        raise InterfaceError(f"unknown server flavour {name!r}: expected one of {sorted(_BY_NAME)}")
    return flavor


def server_flavor(name: FlavorName | None, server_version: str | bytes | None) -> Flavor:
    """The flavour of a server named ``name`` (``None``: the one its handshake's
    ``server_version`` says, MySQL without one); a MySQL ``server_version`` before 8.3 gives
    :data:`MYSQL_UNTAGGED`."""
    if name == "mariadb":
        return MARIADB
    if server_version is None:
        return MYSQL
    detected = detect_flavor(server_version)
    return detected if name is None or detected.name == "mysql" else MYSQL


# --- helpers ------------------------------------------------------------------------------------


def _raw(value: object) -> str | bytes | None:
    """A value a driver gave as text or bytes (``None`` stays ``None``)."""
    if value is None or isinstance(value, str | bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return str(value)


def _quote_gtid_text(text: str) -> str:
    """Quote a rendered GTID state as an SQL string literal.

    The text comes from our own formatter; checking it anyway means that a formatter bug can
    never turn into SQL injection.  No character that needs escaping can pass the check.
    """
    if not _GTID_TEXT.fullmatch(text):
        raise LocalProtocolError(f"refusing to quote unexpected GTID text {text!r}")
    return f"'{text}'"


def _render_timeout(timeout: float) -> str:
    """Seconds as a plain decimal literal with microsecond precision."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float | Decimal):
        raise InterfaceError(f"timeout must be a number of seconds, not {timeout!r}")
    value = float(timeout)
    if not math.isfinite(value) or value < 0:
        raise InterfaceError(f"timeout must be finite and >= 0, not {timeout!r}")
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def _tracked_names(current: str | bytes) -> list[str]:
    """Split a ``session_track_system_variables`` value, keeping order, dropping repeats."""
    text = current.decode("utf-8", "replace") if isinstance(current, bytes) else current
    names: list[str] = []
    seen: set[str] = set()
    for raw in text.split(","):
        name = raw.strip()
        if not name:
            continue
        if not _TRACKED_NAME.fullmatch(name):
            raise InterfaceError(f"unexpected name in session_track_system_variables: {name!r}")
        if name.lower() not in seen:
            seen.add(name.lower())
            names.append(name)
    return names


_OFF: Final = frozenset({"0", "OFF", "FALSE"})


def _switched_on(value: object) -> bool:
    """A server variable's value as a switch: ``0``/``OFF`` (any case) is off, the rest on."""
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("ascii", "replace")
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    return str(value).strip().upper() not in _OFF


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float | Decimal):
        finite = value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)
        return int(value) if finite and value == int(value) else None
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("ascii", "replace")
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        return int(value.strip())
    return None


def _text(value: object) -> str:
    """A column's value as text (the proxy reads bytes, a driver str or int)."""
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return str(value)
