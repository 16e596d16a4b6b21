"""Consistency levels and the per-session routing configuration.

The level says what a read must see (see DESIGN "Consistency levels"); ``on_timeout`` says what
happens when no replica catches up in time.  Both are plain string enums so that the same words
work in ``consistent.connect(level="read_latest")``, in URLs and in trace attributes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from consistent.errors import InterfaceError
from consistent.vocabulary import FlavorName, Tracking

__all__ = ["Level", "OnTimeout", "PolicyConfig", "Tracking"]

_E = TypeVar("_E", bound=StrEnum)


def _parse_member(cls: type[_E], value: str | _E, what: str) -> _E:
    """The member of ``cls`` named ``value`` (case-insensitive; ``-`` may stand for ``_``);
    :class:`InterfaceError` listing the choices when there is none."""
    if isinstance(value, cls):
        return value
    try:
        return cls(str(value).strip().lower().replace("-", "_"))
    except ValueError:
        names = ", ".join(member.value for member in cls)
        raise InterfaceError(f"unknown {what} {value!r} (one of {names})") from None


class Level(StrEnum):
    """What a read routed to a replica is guaranteed to see."""

    #: No guarantee; reads may be stale (optionally bounded by ``PolicyConfig.max_lag``).
    EVENTUAL = "eventual"
    #: Every write this session committed (OWN_GTID / MariaDB ``last_gtid``).
    READ_OWN_WRITES = "read_own_writes"
    #: Every write this process (or this proxy) had had acknowledged before the read began,
    #: and everything this session already saw: its reads never go backwards.  From the GTIDs
    #: the primary reports to every session (OWN_GTID / ``last_gtid``; ALL_GTIDS where the
    #: server has it) and what the replicas it read from were known to have executed.
    READ_ALL_WRITES = "read_all_writes"
    #: Everything committed anywhere before the read began (primary state fetched per read).
    READ_LATEST = "read_latest"

    @classmethod
    def parse(cls, value: str | Level) -> Level:
        """The level named ``value`` (case-insensitive; ``-`` may stand for ``_``)."""
        return _parse_member(cls, value, "consistency level")


class OnTimeout(StrEnum):
    """What to do when a replica does not reach the required set within ``wait_timeout``."""

    #: Run the read on the primary (always consistent, costs primary capacity).
    PRIMARY = "primary"
    #: Wait on the next-best replica; the primary once every replica was tried.
    NEXT_REPLICA = "next_replica"
    #: Raise :class:`consistent.errors.ConsistencyTimeout` (not a disconnect errno).
    ERROR = "error"

    @classmethod
    def parse(cls, value: str | OnTimeout) -> OnTimeout:
        """The behaviour named ``value`` (case-insensitive; ``-`` may stand for ``_``)."""
        return _parse_member(cls, value, "on_timeout")


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """How one session routes reads.  Immutable: changing the level builds a new config."""

    level: Level = Level.READ_OWN_WRITES
    #: Seconds a replica may take to reach the required set, per wait.
    wait_timeout: float = 1.0
    on_timeout: OnTimeout = OnTimeout.PRIMARY
    #: ``eventual`` only: skip replicas whose estimated lag exceeds this many seconds.
    max_lag: float | None = None
    #: A read whose replica connection died after the read was sent runs again on another
    #: server; ``False`` reports the failure instead (a statement that never left is always
    #: routed elsewhere: nothing ran).
    retry_reads: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "level", Level.parse(self.level))
        object.__setattr__(self, "on_timeout", OnTimeout.parse(self.on_timeout))
        timeout = self.wait_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise InterfaceError(f"wait_timeout must be a number of seconds, not {timeout!r}")
        if not math.isfinite(timeout) or timeout <= 0:
            raise InterfaceError(f"wait_timeout must be positive and finite, not {timeout!r}")
        if self.max_lag is not None and (
            isinstance(self.max_lag, bool)
            or not isinstance(self.max_lag, int | float)
            or not self.max_lag >= 0
        ):
            raise InterfaceError(f"max_lag must be a non-negative number, not {self.max_lag!r}")

    @property
    def tracking(self) -> Tracking:
        """The tracker this configuration needs on a MySQL primary connection."""
        return Tracking.ALL if self.level is Level.READ_ALL_WRITES else Tracking.OWN

    def tracking_on(self, flavor: FlavorName) -> Tracking:
        """The tracker this configuration needs on a ``flavor`` primary connection: MariaDB
        has only ``last_gtid`` (:attr:`Tracking.OWN`) at every level, and ``read_all_writes``
        needs nothing more there (see :mod:`consistent.policy.acknowledged`)."""
        return Tracking.OWN if flavor == "mariadb" else self.tracking
