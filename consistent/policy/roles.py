"""Which configured server is the primary, learnt from the servers themselves.

Sans-I/O: the monitors observe each server (:class:`ServerObservation`: reachable, whether it
refuses writes, which servers it replicates from); :func:`discover_roles` turns one round of
observations into a :class:`RoleVerdict`.  The configured primary is a starting hint, not the
truth, as in ProxySQL's ``read_only`` hostgroups and MaxScale's MariaDB monitor:

* a *candidate* is a reachable server that accepts writes (``read_only`` off) and does not
  replicate (a writable replica is a misconfigured replica, not a primary; a source is not
  matched against the set, since a replica may name its source by another address than the
  configuration does);
* one candidate: it is the primary;
* none (a switchover in progress: the old primary already read-only, the new one not yet
  writable; or the primary is down): the last known primary stays, and the verdict says that
  no server accepts writes;
* two or more: **split brain**.  The last known primary stays if it is one of them (writes go
  nowhere new); the verdict names them all, loudly.

What is not known counts as configured: a server whose ``read_only`` or replication the monitor
could not read (not yet, or not allowed: reading replication needs the ``REPLICATION CLIENT`` /
``REPLICA MONITOR`` privilege) is a candidate only if it is the current primary.

:class:`SharedRoles` keeps the verdict for every form: the monitors (the proxy's, the
wrapper's threads) hand it their observations, and it logs a change of primary and split brain
once, and after a change keeps the replicas out of the reads until each is checked against the
new primary's history (:meth:`SharedRoles.trusts`).
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from consistent.errors import InterfaceError
from consistent.flavors import Flavor
from consistent.gtid import GtidState
from consistent.hostport import host_port_or_default
from consistent.policy.knowledge import ReplicaKnowledge

__all__ = [
    "AllowList",
    "OnSplitBrain",
    "RoleVerdict",
    "ServerObservation",
    "SharedRoles",
    "discover_roles",
]

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


@dataclass(frozen=True, slots=True)
class AllowList:
    """Where discovered replicas may be: networks (``10.1.0.0/16``, ``127.0.0.1``) or host
    names (compared without case).  Empty: replica discovery is off."""

    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    names: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, items: Iterable[str] | str | None) -> AllowList:
        """From a list, or comma-separated text; :class:`InterfaceError` names a bad item."""
        if items is None:
            return cls()
        if isinstance(items, str):
            items = items.split(",")
        networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        names: set[str] = set()
        for item in items:
            text = str(item).strip()
            if not text:
                continue
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                if "/" in text or any(c.isspace() for c in text):
                    raise InterfaceError(
                        f"discover_replicas: {text!r} is neither a network nor a host name"
                    ) from None
                names.add(text.lower())
        return cls(tuple(networks), frozenset(names))

    def __bool__(self) -> bool:
        return bool(self.networks or self.names)

    def allows(self, host: str) -> bool:
        """Whether a replica at ``host`` (an IP literal or a name) may join."""
        try:
            ip = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            return host.lower() in self.names
        return any(ip.version == net.version and ip in net for net in self.networks)


@dataclass(frozen=True, slots=True)
class ServerObservation:
    """What a monitor last learnt of one server (``address``: ``host:port``)."""

    address: str
    #: False while the monitor cannot reach it.
    reachable: bool
    #: ``@@read_only`` (or ``@@super_read_only``) is on; ``None``: not known yet.
    read_only: bool | None
    #: The ``host:port`` of every source it replicates from (an empty set: none); ``None``:
    #: not known yet.
    sources: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class RoleVerdict:
    """The outcome of one round of observations."""

    #: The server writes go to (the last known one when no single candidate stands out).
    primary: str
    #: The reachable servers that accept writes and do not replicate.
    writable: tuple[str, ...]
    #: Two or more such servers at once.
    split_brain: bool

    @property
    def no_writable(self) -> bool:
        """No server accepts writes (a switchover in progress, or the primary is down)."""
        return not self.writable


def discover_roles(observations: Iterable[ServerObservation], current: str) -> RoleVerdict:
    """The verdict for ``observations``, given ``current``, the primary known so far."""
    seen = list(observations)
    writable = tuple(
        sorted(
            o.address
            for o in seen
            if o.reachable
            and (o.read_only is False or (o.read_only is None and o.address == current))
            and (o.sources == frozenset() or (o.sources is None and o.address == current))
        )
    )
    if len(writable) == 1:
        return RoleVerdict(writable[0], writable, split_brain=False)
    return RoleVerdict(current, writable, split_brain=len(writable) > 1)


class SharedRoles:
    """The roles of one topology's servers, from their monitors' observations."""

    def __init__(
        self, primary: str, servers: Iterable[str], knowledge: ReplicaKnowledge | None = None
    ) -> None:
        #: The server writes go to (``host:port``).
        self.primary = primary
        #: The servers of the topology: those configured, and those discovered.
        self.servers = frozenset(servers)
        self.configured = self.servers
        #: Where discovered replicas may be (empty: discovery off; see :meth:`listed`).
        self.allow = AllowList()
        #: Replicas that joined because the primary lists them, and a number that grows
        #: whenever that set changes (connections compare it with the last they followed).
        self.discovered: frozenset[str] = frozenset()
        self.discovered_version = 0
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
        #: Called with the previous primary and the verdict at each change (by key: the
        #: wrapper registers one per telemetry pipeline, which records the change).
        self.listeners: dict[object, Callable[[str, RoleVerdict], None]] = {}
        self._lock = threading.Lock()

    def observe(self, *observations: ServerObservation) -> None:
        """Monitors read these servers' roles (or could not reach them); several at once are
        judged together."""
        known = [o for o in observations if o.address in self.servers]
        if not known:
            return
        with self._lock:
            for observation in known:
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
                for listener in list(self.listeners.values()):
                    listener(current, verdict)

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

    def listed(self, replicas: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
        """The primary lists ``replicas`` (``host:port``): those on the allow-list that are not
        configured are the discovered ones from now on.  Returns those that joined and those
        that left."""
        allowed = frozenset(
            name
            for name in replicas - self.configured
            if self.allow.allows(host_port_or_default(name)[0])
        )
        with self._lock:
            # A discovered replica that became the primary stays (it lists itself nowhere).
            allowed |= self.discovered & {self.primary}
            joined, left = allowed - self.discovered, self.discovered - allowed
            if joined or left:
                for name in sorted(joined):
                    logger.info("replica %s discovered (the primary lists it): it joins", name)
                for name in sorted(left):
                    logger.info("discovered replica %s is no longer listed: it leaves", name)
                self.discovered = allowed
                self.servers = self.configured | allowed
                for name in left:
                    self._seen.pop(name, None)
                self.discovered_version += 1
        return joined, left

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
