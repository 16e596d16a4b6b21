"""The wrapper's view of :mod:`consistent.flavors`: the statements it sends, per flavour.

Everything flavour-specific (statement texts, result codes, parsing) comes from
:mod:`consistent.flavors`; this adapter only maps it onto the policy's vocabulary (tracking
``OWN``/``ALL``, wait outcomes) and precomputes what does not change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from consistent import flavors
from consistent.flavors import Flavor, ServerRole, TrackingMode
from consistent.gtid import GtidState
from consistent.policy import Tracking, WaitOutcome, wait_outcome
from consistent.policy.states import FlavorName

__all__ = ["FlavorSQL", "detect_flavor", "flavor_sql"]


@dataclass(frozen=True, slots=True)
class FlavorSQL:
    """The statements one flavour needs, for the wrapper."""

    flavor: Flavor
    primary_executed: str = field(init=False)
    replica_executed: str = field(init=False)

    def __post_init__(self) -> None:
        flavor = self.flavor
        object.__setattr__(
            self, "primary_executed", flavor.executed_state_statement(ServerRole.PRIMARY)
        )
        object.__setattr__(
            self, "replica_executed", flavor.executed_state_statement(ServerRole.REPLICA)
        )

    @property
    def name(self) -> FlavorName:
        """``"mysql"`` or ``"mariadb"``."""
        return "mariadb" if self.flavor.name == "mariadb" else "mysql"

    @property
    def gtid_tags(self) -> bool:
        """Whether the server's GTIDs may carry tags (MySQL 8.3+, and MariaDB's positions,
        which the parser reads the same either way)."""
        flavor = self.flavor
        return not isinstance(flavor, flavors.MySQLFlavor) or flavor.gtid_tags

    @property
    def tracking_probe(self) -> str | None:
        """The query whose value :meth:`primary_tracking` needs (MariaDB keeps what the
        session already tracks), or ``None``."""
        return self.flavor.tracking_probe()

    def primary_tracking(self, tracking: Tracking, current: object = None) -> str | None:
        """The statement that makes the primary's OK packets carry what ``tracking`` needs
        (``None``: already on).  MariaDB has only ``last_gtid``, at every level
        (``read_all_writes`` needs nothing more: see :mod:`consistent.policy.acknowledged`)."""
        mode = TrackingMode.ALL_GTIDS if tracking is Tracking.ALL else TrackingMode.OWN_GTID
        if mode not in self.flavor.supported_modes:
            mode = TrackingMode.OWN_GTID
        value = current if isinstance(current, str | bytes) or current is None else str(current)
        return self.flavor.tracking_statement(mode, value)

    @property
    def replica_tracking(self) -> str | None:
        """On MySQL, ALL_GTIDS on replica connections reports their executed state in every
        OK packet (feeding the replica knowledge); MariaDB has no such tracker."""
        if TrackingMode.ALL_GTIDS not in self.flavor.supported_modes:
            return None
        return self.flavor.tracking_statement(TrackingMode.ALL_GTIDS)

    def wait_statement(self, state: GtidState, timeout: float) -> str:
        """The wait for ``state``, at most ``timeout`` seconds, as one ``SELECT``."""
        return self.flavor.wait_statement(state, timeout)

    def wait_outcome(self, value: object) -> WaitOutcome:
        """The policy's outcome for the wait function's value."""
        return wait_outcome(self.flavor, value)

    def parse_executed(self, value: object) -> GtidState:
        """The state read by :attr:`primary_executed` / :attr:`replica_executed`."""
        if isinstance(value, bytearray):
            value = bytes(value)
        if value is not None and not isinstance(value, str | bytes):
            value = str(value)
        return self.flavor.parse_executed(value)


_BY_NAME: Final = {
    "mysql": FlavorSQL(flavors.MYSQL),
    "mariadb": FlavorSQL(flavors.MARIADB),
}
_UNTAGGED: Final = FlavorSQL(flavors.MYSQL_UNTAGGED)


def flavor_sql(name: FlavorName, server_version: str | bytes | None = None) -> FlavorSQL:
    """The statements of flavour ``name``; a MySQL ``server_version`` before 8.3 gives the
    flavour that reads its GTIDs without tags."""
    if name == "mysql" and server_version is not None:
        flavor = flavors.detect_flavor(server_version)
        if isinstance(flavor, flavors.MySQLFlavor) and not flavor.gtid_tags:
            return _UNTAGGED
    return _BY_NAME[name]


def detect_flavor(server_version: str | bytes | None) -> FlavorName:
    """``"mariadb"`` when the handshake's version string says MariaDB, else ``"mysql"``."""
    if server_version is None:
        return "mysql"
    return "mariadb" if flavors.detect_flavor(server_version).name == "mariadb" else "mysql"
