"""The words the routing policy and the server flavours share.

:mod:`consistent.flavors` says how each server family does a thing; :mod:`consistent.policy`
decides what to do.  Both speak of the same few things, defined once here, below both:

- :data:`FlavorName`: the server family, ``"mysql"`` or ``"mariadb"``;
- :class:`Tracking`: which GTIDs a primary connection's tracker reports;
- :class:`WaitOutcome`: how a wait on a replica ended.

The policy re-exports each (``consistent.policy.Tracking``, ``consistent.policy.WaitOutcome``,
``consistent.policy.FlavorName``); they are the same objects.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

__all__ = ["FlavorName", "Tracking", "WaitOutcome"]

FlavorName = Literal["mysql", "mariadb"]


class Tracking(StrEnum):
    """Which GTIDs the primary connection's tracker must report for the current level."""

    #: The session's own GTIDs (MySQL ``OWN_GTID``; MariaDB ``last_gtid``).
    OWN = "own"
    #: The primary's whole executed set after each commit (MySQL ``ALL_GTIDS``, used at
    #: ``read_all_writes``).  MariaDB has no such tracker: its sessions track ``last_gtid`` at
    #: every level, and ``read_all_writes`` needs nothing more.
    ALL = "all"


class WaitOutcome(StrEnum):
    """How a wait on a replica ended, as reported by the driver."""

    #: The replica reached the wait set.
    REACHED = "reached"
    #: The wait returned its timeout result.
    TIMED_OUT = "timed_out"
    #: The connection to the replica failed (or could not be opened).
    FAILED = "failed"
    #: The replica refused the wait statement with a server error, or its wait function
    #: declined to wait (NULL) or answered what it cannot: nothing is known about the replica.
    ERROR = "error"
