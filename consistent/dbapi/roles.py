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
from collections.abc import Iterable, Sequence

from consistent.flavors import Flavor
from consistent.gtid import GtidState
from consistent.policy import ReplicaKnowledge
from consistent.policy.roles import (
    OnSplitBrain,
    RoleVerdict,
    ServerObservation,
    discover_roles,
)

__all__ = ["OnSplitBrain", "SharedRoles"]

logger = logging.getLogger(__name__)


class SharedRoles:
    """The roles of one topology's servers, from their monitors' observations."""

    def __init__(
        self, primary: str, servers: Iterable[str], knowledge: ReplicaKnowledge | None = None
    ) -> None:
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
        #: After the primary changed: the new primary's address and its answer to the
        #: flavour's ``history_statement`` (read once by its monitor), from which each
        #: session tells whether the failover lost GTIDs it required.
        self.history: tuple[str, Sequence[object]] | None = None
        self._seen: dict[str, ServerObservation] = {}
        self._knowledge = knowledge
        self._diverged: set[str] = set()
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
                self.history = None
                self.primary = verdict.primary
                self._suspend_replicas()

    def _suspend_replicas(self) -> None:
        """After the primary changed, no replica serves a read until its monitor compared it
        with the new primary's history (:meth:`trusts`): what the knowledge held of them
        is forgotten (a replica that kept the old primary's lost writes would pass for
        having the new primary's writes of the same sequence numbers)."""
        knowledge = self._knowledge
        if knowledge is None:
            return
        for name in self.servers - {self.primary}:
            knowledge.record_failure(name)

    def trusts(self, replica: str, executed: GtidState, flavor: Flavor) -> bool:
        """Whether a replica's poll (its executed state) may feed the knowledge: always
        before any change of primary; after one, once the new primary's history is known
        and the replica holds nothing that history lacks.  A replica that does has
        diverged: it is logged, and stays out of the reads."""
        if self.changes == 0:
            return True
        history = self.history
        if history is None:
            return False
        diverged = flavor.diverged(executed, history[1])
        if diverged is None:
            self._diverged.discard(replica)
            return True
        if replica not in self._diverged:
            self._diverged.add(replica)
            logger.error(
                "replica %s executed %s, which the primary %s never had (the old primary's "
                "writes, lost by the failover): it is on another history and serves no "
                "reads until it is rebuilt",
                replica,
                diverged,
                history[0],
            )
        return False

    def wants_history(self, address: str) -> bool:
        """Whether the monitor of ``address`` is to read its history: it became the primary
        and nobody read it since."""
        return self.changes > 0 and self.history is None and address == self.primary

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
