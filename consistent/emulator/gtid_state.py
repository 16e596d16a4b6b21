"""The GTID state of one server: ``gtid_executed``, ``gtid_purged``, owned GTIDs, GTID_NEXT.

This mirrors mysqld's ``Gtid_state`` (``sql/rpl_gtid_state.cc``): a session *owns* a GTID from
``SET GTID_NEXT='uuid:n'`` (or, for automatic GTIDs, only while committing) until COMMIT adds it
to ``gtid_executed`` or ROLLBACK releases it.  Automatic numbers are the smallest GNO at or
above 1 that is neither executed nor owned, so gaps are filled first (reference §3.3).

Every growth of ``gtid_executed`` resolves the waiters of ``WAIT_FOR_EXECUTED_GTID_SET``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import Enum

from consistent.emulator.config import GtidMode
from consistent.emulator.errors import ER, SqlError, sql_error
from consistent.emulator.waiters import WaitRegistry
from consistent.errors import MalformedGtid, MalformedGtidSet
from consistent.gtid import Gtid, GtidSet

__all__ = ["GtidNext", "GtidNextType", "GtidState", "parse_gtid_set"]


class GtidNextType(Enum):
    """Kinds of ``@@SESSION.gtid_next`` (``enum_gtid_type`` in ``sql/rpl_gtid.h``)."""

    AUTOMATIC = "AUTOMATIC"
    ASSIGNED = "ASSIGNED"
    ANONYMOUS = "ANONYMOUS"
    UNDEFINED = "UNDEFINED"
    """After a transaction with an assigned GTID ended: the next statement must set it again."""


@dataclass(frozen=True)
class GtidNext:
    """The value of ``@@SESSION.gtid_next``."""

    type: GtidNextType = GtidNextType.AUTOMATIC
    gtid: Gtid | None = None

    def __str__(self) -> str:
        if self.gtid is not None:
            return str(self.gtid)
        return self.type.value

    @classmethod
    def parse(cls, text: str, *, tags: bool = True) -> GtidNext:
        """Parse a ``SET GTID_NEXT`` value; raises ER_MALFORMED_GTID_SPECIFICATION (1774).
        ``tags=False``: a server before 8.3, where ``uuid:tag:n`` is malformed."""
        word = text.strip().upper()
        if word == "AUTOMATIC":
            return cls(GtidNextType.AUTOMATIC)
        if word == "ANONYMOUS":
            return cls(GtidNextType.ANONYMOUS)
        try:
            gtid = Gtid.parse(text, tags=tags)
        except MalformedGtid as exc:
            raise sql_error(ER.MALFORMED_GTID_SPECIFICATION, text[:200]) from exc
        return cls(GtidNextType.ASSIGNED, gtid)

    def undefined(self) -> GtidNext:
        """The value left behind when the transaction using an assigned GTID ends."""
        return GtidNext(GtidNextType.UNDEFINED, self.gtid)


def parse_gtid_set(text: str, *, tags: bool = True) -> GtidSet:
    """Parse GTID-set text for SQL functions and variables; raises 1772 as a :class:`SqlError`.
    ``tags`` is the server's syntax (tagged GTIDs from 8.3)."""
    try:
        return GtidSet.parse(text, tags=tags)
    except MalformedGtidSet as exc:
        raise sql_error(ER.MALFORMED_GTID_SET_SPECIFICATION, text[:200]) from exc


class GtidState:
    """``gtid_executed``, ``gtid_purged`` and GTID ownership of one server."""

    def __init__(self, server_uuid: str, mode: GtidMode, *, log_bin: bool) -> None:
        self.server_uuid = server_uuid.lower()
        self.mode = mode
        self.log_bin = log_bin
        self._executed = GtidSet()
        self._lost = GtidSet()
        self._owned: dict[Gtid, int] = {}
        self._released: dict[Gtid, asyncio.Event] = {}
        self.waiters = WaitRegistry()

    # ----- views ---------------------------------------------------------------------------

    @property
    def executed(self) -> GtidSet:
        """``@@GLOBAL.gtid_executed``."""
        return self._executed

    @property
    def purged(self) -> GtidSet:
        """``@@GLOBAL.gtid_purged``: with the binary log off it equals ``gtid_executed``
        (mysqld reports it that way, ``Gtid_state::update_gtids_impl_own_gtid``)."""
        return self._lost if self.log_bin else self._executed

    @property
    def owned(self) -> GtidSet:
        """Every GTID owned by some session."""
        return GtidSet(self._owned)

    def owner_of(self, gtid: Gtid) -> int | None:
        """The connection id owning ``gtid``, if any."""
        return self._owned.get(gtid)

    def owned_text(self) -> str:
        """``@@GLOBAL.gtid_owned``: ``gtid#connection`` items, as mysqld prints them."""
        return ",".join(f"{g}#{owner}" for g, owner in sorted(self._owned.items(), key=str))

    # ----- ownership -----------------------------------------------------------------------

    def is_executed(self, gtid: Gtid) -> bool:
        """Whether ``gtid`` already committed (a transaction using it is skipped)."""
        return gtid in self._executed

    async def acquire(self, gtid: Gtid, owner: int) -> bool:
        """Take ownership of ``gtid`` for ``owner``, waiting while another session owns it.

        Returns ``False`` when the GTID is already executed: the session then skips its next
        transaction, as mysqld does for a GTID that was applied before.
        """
        while True:
            taken = self.try_acquire(gtid, owner)
            if taken is not None:
                return taken
            event = self._released.setdefault(gtid, asyncio.Event())
            await event.wait()

    def try_acquire(self, gtid: Gtid, owner: int) -> bool | None:
        """:meth:`acquire` without waiting: None when another session owns ``gtid``."""
        if gtid in self._executed:
            return False
        current = self._owned.get(gtid)
        if current is None or current == owner:
            self._owned[gtid] = owner
            return True
        return None

    def generate(self, owner: int) -> Gtid:
        """Own and return the next automatic GTID of this server (smallest free GNO >= 1)."""
        uuid = self.server_uuid
        taken = self._executed
        if self._owned:
            owned = [g for g in self._owned if g.uuid == uuid]
            if owned:
                taken = taken | GtidSet(owned)
        gtid = Gtid(uuid, taken.next_free_gno(uuid))
        self._owned[gtid] = owner
        return gtid

    def release(self, gtid: Gtid) -> None:
        """Give up ownership without committing (ROLLBACK)."""
        self._owned.pop(gtid, None)
        event = self._released.pop(gtid, None)
        if event is not None:
            event.set()

    def release_all(self, owner: int) -> None:
        """Release whatever ``owner`` owns (the session disconnected)."""
        for gtid in [g for g, o in self._owned.items() if o == owner]:
            self.release(gtid)

    def commit(self, gtid: Gtid) -> None:
        """Add an owned (or replicated) GTID to ``gtid_executed`` and wake the waiters."""
        self._executed = self._executed.add(gtid)
        self.release(gtid)
        self.waiters.notify(self._executed)

    # ----- whole-set changes ---------------------------------------------------------------

    def add_purged(self, gtids: GtidSet, *, plus: bool) -> GtidSet:
        """``SET GLOBAL gtid_purged``; returns the GTIDs actually added.

        The rules of ``Gtid_state::add_lost_gtids``: without ``+`` the new value must contain
        the old one; the added part must not overlap ``gtid_executed`` nor the owned GTIDs.
        """
        added = gtids
        if not plus:
            if not self.purged.issubset(gtids):
                raise sql_error(
                    ER.CANT_SET_GTID_PURGED_DUE_SETS_CONSTRAINTS,
                    "the new value must be a superset of the old value",
                )
            added = gtids - self.purged
        if not added.isdisjoint(self._executed):
            raise sql_error(
                ER.CANT_SET_GTID_PURGED_DUE_SETS_CONSTRAINTS,
                "the added gtid set must not overlap with @@GLOBAL.GTID_EXECUTED",
            )
        if not added.isdisjoint(self.owned):
            raise sql_error(
                ER.CANT_SET_GTID_PURGED_DUE_SETS_CONSTRAINTS,
                "the added gtid set must not overlap with @@GLOBAL.GTID_OWNED",
            )
        self._lost = self._lost | added
        self._executed = self._executed | added
        self.waiters.notify(self._executed)
        return added

    def add_lost(self, gtids: GtidSet) -> None:
        """GTIDs left the binary log (PURGE BINARY LOGS): they become part of gtid_purged."""
        self._lost = self._lost | (gtids & self._executed)

    def reset(self) -> None:
        """RESET MASTER / RESET BINARY LOGS AND GTIDS: both sets become empty."""
        self._executed = GtidSet()
        self._lost = GtidSet()

    def restore(self, executed: GtidSet, purged: GtidSet) -> None:
        """Install the sets recovered at server start."""
        self._executed = executed
        self._lost = purged
        self._owned.clear()
        self.waiters.notify(self._executed)

    def check_not_owned(self, required: GtidSet, owner: int) -> SqlError | None:
        """The 3173 error when ``owner`` owns a GTID of ``required`` (WAIT_FOR_...)."""
        for gtid, who in self._owned.items():
            if who == owner and gtid in required:
                return sql_error(ER.CANT_WAIT_FOR_EXECUTED_GTID_SET_WHILE_OWNING_A_GTID, str(gtid))
        return None
