"""Which server is the primary, as the wrapper's monitors learn it, shared by the connections
of one topology.

The monitors (:mod:`consistent.dbapi.monitor`) read each server's ``read_only`` state and
replication sources at every poll and hand them to the :class:`SharedRoles` of the topology
(the set of servers a connection names, whichever of them it names as the primary);
:func:`~consistent.policy.roles.discover_roles` decides.  Connections read
:attr:`SharedRoles.primary` before each statement (one attribute read, no lock: the monitor
thread replaces it whole) and follow a new primary from their next statement
(:meth:`~consistent.dbapi.core.SessionCore._follow_roles`).

Split brain (two servers accept writes and replicate from none) is logged as an error once,
counted, and, per ``on_split_brain``, either leaves writes on the last known primary
(``keep``) or refuses them until one of the servers is read-only again (``refuse``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from enum import StrEnum

from consistent.errors import InterfaceError
from consistent.policy.roles import RoleVerdict, ServerObservation, discover_roles

__all__ = ["OnSplitBrain", "SharedRoles"]

logger = logging.getLogger(__name__)


class OnSplitBrain(StrEnum):
    """What writes do while two servers accept them."""

    #: Writes keep going to the last known primary (nowhere new).
    KEEP = "keep"
    #: Statements for the primary fail (1290) until the split brain resolves.
    REFUSE = "refuse"

    @classmethod
    def parse(cls, value: OnSplitBrain | str) -> OnSplitBrain:
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise InterfaceError(
                f"on_split_brain must be 'keep' or 'refuse', not {value!r}"
            ) from None


class SharedRoles:
    """The roles of one topology's servers, from their monitors' observations."""

    def __init__(self, primary: str, servers: Iterable[str]) -> None:
        #: The server writes go to (``host:port``).
        self.primary = primary
        #: The servers of the topology.
        self.servers = frozenset(servers)
        #: Two or more servers accept writes and replicate from none.
        self.split_brain = False
        #: Times the primary changed.
        self.changes = 0
        #: The last verdict (``None`` before the first observation).
        self.verdict: RoleVerdict | None = None
        self._seen: dict[str, ServerObservation] = {}
        self._lock = threading.Lock()

    def observe(self, observation: ServerObservation) -> None:
        """A monitor read one server's roles (or could not reach it)."""
        if observation.address not in self.servers:
            return
        with self._lock:
            self._seen[observation.address] = observation
            current = self.primary
            # A server not observed yet is not known: only the current primary may count.
            seen = [
                self._seen.get(name) or ServerObservation(name, reachable=True, read_only=None)
                for name in sorted(self.servers)
            ]
            verdict = discover_roles(seen, current)
            self.verdict = verdict
            self._report_split_brain(verdict)
            if verdict.primary != current:
                self.changes += 1
                logger.warning(
                    "the primary is now %s (it accepts writes and replicates from no server; "
                    "%s was the primary): every connection writes there from its next "
                    "statement; a transaction open on the old primary fails",
                    verdict.primary,
                    current,
                )
                self.primary = verdict.primary

    def _report_split_brain(self, verdict: RoleVerdict) -> None:
        if verdict.split_brain and not self.split_brain:
            logger.error(
                "SPLIT BRAIN: %s all accept writes and replicate from no server; writes go "
                "nowhere new (the primary stays %s) until one of them is read-only or "
                "replicates",
                ", ".join(verdict.writable),
                verdict.primary,
            )
        elif self.split_brain and not verdict.split_brain:
            logger.warning("split brain resolved: %s is the primary", verdict.primary)
        self.split_brain = verdict.split_brain
