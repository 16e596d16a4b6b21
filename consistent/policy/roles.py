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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from consistent.errors import InterfaceError

__all__ = ["OnSplitBrain", "RoleVerdict", "ServerObservation", "discover_roles"]


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
