"""Session state trackers (WL#6972 and friends): what an OK packet reports about the session.

A faithful model of ``sql/session_tracker.cc`` and ``sql/rpl_context.cc`` (reference §1.3,
§2.1).  Five trackers, stored in this order: system variables, schema, state change, GTIDs,
transaction info (state before characteristics).  A tracker reports only when it is *changed*;
mysqld appends the blocks to an OK packet when the client set ``CLIENT_SESSION_TRACK``, some
tracker is enabled and some tracker changed, and only then does a tracker reset its flags.

The GTID tracker is fed by a per-session collector (``Session_consistency_gtids_ctx``):

* ``OWN_GTID`` collects the GTID a session's transaction commits with;
* ``ALL_GTIDS`` collects the whole ``gtid_executed`` after every commit outside a
  multi-statement transaction (and after explicit or implicit COMMIT);
* ROLLBACK and ROLLBACK TO SAVEPOINT never collect;
* the mode in force is the one cached when the previous response was sent, except that the
  first registration of the collector caches the mode of that moment;
* the collected set is cleared after every response packet.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum, IntFlag
from typing import Final

from consistent.gtid import Gtid, GtidSet
from consistent.protocol.session_state import (
    Gtids,
    Schema,
    SessionStateChange,
    StateChange,
    SystemVariable,
    TransactionCharacteristics,
    TransactionState,
)

__all__ = [
    "DEFAULT_TRACKED_VARIABLES",
    "GtidsCollector",
    "SessionTrackers",
    "TrackGtids",
    "TrackTransactionInfo",
    "TransactionStateTracker",
    "TxReadFlags",
    "TxState",
]

#: MySQL 8.0's default ``session_track_system_variables``.
DEFAULT_TRACKED_VARIABLES = (
    "time_zone,autocommit,character_set_client,character_set_results,character_set_connection"
)


class TrackGtids(Enum):
    """``session_track_gtids`` (an ENUM sysvar: 0, 1, 2)."""

    OFF = 0
    OWN_GTID = 1
    ALL_GTIDS = 2


class TrackTransactionInfo(Enum):
    """``session_track_transaction_info``."""

    OFF = 0
    STATE = 1
    CHARACTERISTICS = 2


class TxState(IntFlag):
    """``enum_tx_state`` bits of the transaction state tracker."""

    EMPTY = 0
    EXPLICIT = 1
    IMPLICIT = 2
    READ_TRX = 4
    READ_UNSAFE = 8
    WRITE_TRX = 16
    WRITE_UNSAFE = 32
    STMT_UNSAFE = 64
    RESULT_SET = 128
    WITH_SNAPSHOT = 256
    LOCKED_TABLES = 512


class TxReadFlags(Enum):
    """Access mode one-shot of the next/current transaction."""

    INHERIT = 0
    READ_ONLY = 1
    READ_WRITE = 2


_CHG_STATE = 1
_CHG_CHISTICS = 2
#: The collector's empty set (sets are immutable: every response starts from this one).
_NO_GTIDS: Final = GtidSet()
_ACCESS = TxState.READ_TRX | TxState.READ_UNSAFE | TxState.WRITE_TRX | TxState.WRITE_UNSAFE


class GtidsCollector:
    """``Session_consistency_gtids_ctx``: collects the GTIDs the next response reports."""

    def __init__(self) -> None:
        self.registered = False
        self.current_mode = TrackGtids.OFF
        self.collected = _NO_GTIDS
        self.on_change: Callable[[], None] | None = None

    def register(self, mode: TrackGtids, on_change: Callable[[], None]) -> None:
        """The tracker got enabled: the first registration caches the mode right away."""
        if not self.registered:
            self.registered = True
            self.collected = _NO_GTIDS
            self.current_mode = mode
        self.on_change = on_change

    def unregister(self) -> None:
        """The tracker was stored while disabled: stop collecting."""
        self.registered = False
        self.on_change = None
        self.collected = _NO_GTIDS

    def _shall_collect(self, owns_gtid: bool, is_rollback: bool, system: bool) -> bool:
        return (
            (owns_gtid or self.current_mode is TrackGtids.ALL_GTIDS)
            and self.registered
            and not system
            and not is_rollback
        )

    def after_transaction_commit(
        self, executed: GtidSet, *, owns_gtid: bool, is_rollback: bool, system: bool = False
    ) -> None:
        """``notify_after_transaction_commit``: ALL_GTIDS collects the whole executed set."""
        if not self._shall_collect(owns_gtid, is_rollback, system):
            return
        if self.current_mode is TrackGtids.ALL_GTIDS:
            self.collected = self.collected | executed
            self._changed()

    def after_gtid_executed_update(
        self, gtid: Gtid, *, is_rollback: bool = False, system: bool = False
    ) -> None:
        """``notify_after_gtid_executed_update``: OWN_GTID collects the committed GTID."""
        if not self._shall_collect(True, is_rollback, system):
            return
        if self.current_mode is TrackGtids.OWN_GTID:
            self.collected = self.collected.add(gtid)
            self._changed()

    def after_response(self, session_mode: TrackGtids) -> None:
        """``notify_after_response_packet``: clear, and cache the session's current mode."""
        self.collected = _NO_GTIDS
        self.current_mode = session_mode

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()


class TransactionStateTracker:
    """``Transaction_state_tracker``: the 8-character state and the characteristics text."""

    def __init__(self) -> None:
        self.mode = TrackTransactionInfo.OFF
        self.enabled = False
        self.changed = False
        self._tx_changed = 0
        self.current = TxState.EMPTY
        self._reported = TxState.EMPTY
        self.read_flags = TxReadFlags.INHERIT
        self.isolation: str | None = None

    def update(self, mode: TrackTransactionInfo) -> None:
        """``session_track_transaction_info`` was set."""
        self.mode = mode
        if mode is TrackTransactionInfo.OFF:
            self.enabled = False
            return
        if not self.enabled:
            self.current = self._reported = TxState.EMPTY
            self._tx_changed |= _CHG_STATE
            self.enabled = True
        if mode is TrackTransactionInfo.CHARACTERISTICS:
            self._tx_changed |= _CHG_CHISTICS
        self.changed = True

    def _update_change_flags(self) -> None:
        self._tx_changed &= ~_CHG_STATE
        if self.current != self._reported:
            self._tx_changed |= _CHG_STATE
        if self._tx_changed:
            self.changed = True

    def add_state(self, add: TxState, *, autocommit: bool) -> None:
        """``add_trx_state``."""
        if not self.enabled:
            return
        if add == TxState.EXPLICIT:
            self._tx_changed |= _CHG_CHISTICS
            self.current = TxState.EXPLICIT
        elif (
            not self.current & (TxState.EXPLICIT | TxState.IMPLICIT)
            and not autocommit
            and add & _ACCESS
        ):
            self.current |= TxState.IMPLICIT
        if self.current & (TxState.EXPLICIT | TxState.IMPLICIT) or add & TxState.LOCKED_TABLES:
            self.current |= add
        self._update_change_flags()

    def end_trx(self) -> None:
        """``end_trx``: a transaction ended (commit, rollback, implicit commit)."""
        if not self.enabled:
            return
        if self.current != TxState.EMPTY:
            if self.current & TxState.EXPLICIT:
                self._tx_changed |= _CHG_CHISTICS
            self.current &= TxState.LOCKED_TABLES
        self._update_change_flags()

    def set_read_flags(self, flags: TxReadFlags) -> None:
        """``SET TRANSACTION READ ONLY|WRITE`` / ``START TRANSACTION READ …`` / reset."""
        if self.enabled and self.read_flags is not flags:
            self.read_flags = flags
            self._tx_changed |= _CHG_CHISTICS
            self.changed = True

    def set_isolation(self, level: str | None) -> None:
        """``SET TRANSACTION ISOLATION LEVEL …`` one-shot (``None``: inherit)."""
        if self.enabled and self.isolation != level:
            self.isolation = level
            self._tx_changed |= _CHG_CHISTICS
            self.changed = True

    def state_text(self) -> str:
        """The 8 characters ``[T|I|_][r][R][w][W][s][S][L]``."""
        cur = self.current
        return "".join(
            (
                "T" if cur & TxState.EXPLICIT else ("I" if cur & TxState.IMPLICIT else "_"),
                "r" if cur & TxState.READ_UNSAFE else "_",
                "R" if cur & (TxState.READ_TRX | TxState.WITH_SNAPSHOT) else "_",
                "w" if cur & TxState.WRITE_UNSAFE else "_",
                "W" if cur & TxState.WRITE_TRX else "_",
                "s" if cur & TxState.STMT_UNSAFE else "_",
                "S" if cur & TxState.RESULT_SET else "_",
                "L" if cur & TxState.LOCKED_TABLES else "_",
            )
        )

    def characteristics_text(self) -> str:
        """SQL that replays the transaction's characteristics (``store``'s CHISTICS part)."""
        parts: list[str] = []
        if self.isolation is not None:
            parts.append("SET TRANSACTION ISOLATION LEVEL " + self.isolation)
        if self.current & TxState.EXPLICIT:
            text = "START TRANSACTION"
            if self.current & TxState.WITH_SNAPSHOT:
                text += " WITH CONSISTENT SNAPSHOT"
                if self.read_flags is not TxReadFlags.INHERIT:
                    text += ","
            if self.read_flags is TxReadFlags.READ_ONLY:
                text += " READ ONLY"
            elif self.read_flags is TxReadFlags.READ_WRITE:
                text += " READ WRITE"
            parts.append(text)
        elif self.read_flags is not TxReadFlags.INHERIT:
            parts.append(
                "SET TRANSACTION "
                + ("READ ONLY" if self.read_flags is TxReadFlags.READ_ONLY else "READ WRITE")
            )
        return "; ".join(parts) + (";" if parts else "")

    def store(self) -> list[SessionStateChange]:
        """Blocks for the changed parts, then reset (``Transaction_state_tracker::store``)."""
        blocks: list[SessionStateChange] = []
        if self._tx_changed & _CHG_STATE:
            blocks.append(TransactionState(self.state_text()))
        if self.mode is TrackTransactionInfo.CHARACTERISTICS and self._tx_changed & _CHG_CHISTICS:
            blocks.append(TransactionCharacteristics(self.characteristics_text()))
        self.changed = False
        self._reported = self.current
        self._tx_changed = 0
        return blocks


class SessionTrackers:
    """All trackers of one session.  ``value_of(name)`` gives a system variable's session value
    as SHOW VARIABLES prints it; ``schema()`` the current default schema."""

    def __init__(self, value_of: Callable[[str], str], schema: Callable[[], str | None]) -> None:
        self._value_of = value_of
        self._schema = schema
        self.track_all_vars = False
        self.tracked_vars: frozenset[str] = frozenset()
        self.sysvars_enabled = False
        self._changed_vars: set[str] = set()
        self.schema_enabled = False
        self.schema_changed = False
        self.state_enabled = False
        self.state_changed = False
        self.gtids_enabled = False
        self.gtids_changed = False
        self.gtids_mode = TrackGtids.OFF
        self.collector = GtidsCollector()
        self.transaction = TransactionStateTracker()

    # ----- configuration (the session_track_* variables) ----------------------------------

    def set_tracked_variables(self, text: str) -> None:
        """``session_track_system_variables`` changed (``'*'`` tracks every variable)."""
        names = [n.strip().lower() for n in text.split(",") if n.strip()]
        self.track_all_vars = names == ["*"]
        self.tracked_vars = frozenset(() if self.track_all_vars else names)
        self.sysvars_enabled = self.track_all_vars or bool(self.tracked_vars)
        self._changed_vars &= set(self.tracked_vars)

    def set_schema_tracking(self, on: bool) -> None:
        """``session_track_schema``."""
        self.schema_enabled = on

    def set_state_tracking(self, on: bool) -> None:
        """``session_track_state_change``."""
        self.state_enabled = on

    def set_gtids_tracking(self, mode: TrackGtids) -> None:
        """``session_track_gtids`` (``Session_gtids_tracker::update``)."""
        self.gtids_mode = mode
        enabled = mode is not TrackGtids.OFF
        if enabled == self.gtids_enabled:
            return
        self.gtids_enabled = enabled
        if enabled:
            self.collector.register(mode, self._mark_gtids)

    def _mark_gtids(self) -> None:
        self.gtids_changed = True

    # ----- changes ------------------------------------------------------------------------

    def variable_changed(self, name: str) -> None:
        """A session system variable was assigned (even to the same value)."""
        name = name.lower()
        if self.sysvars_enabled and (self.track_all_vars or name in self.tracked_vars):
            self._changed_vars.add(name)
        if self.state_enabled and name != "session_track_state_change":
            self.state_changed = True

    def schema_set(self) -> None:
        """The default schema changed (USE, COM_INIT_DB, DROP DATABASE of the current one)."""
        if self.schema_enabled:
            self.schema_changed = True
        self.session_state_changed()

    def session_state_changed(self) -> None:
        """User variable, temporary table, prepared statement or schema changed."""
        if self.state_enabled:
            self.state_changed = True

    # ----- response -----------------------------------------------------------------------

    def enabled_any(self) -> bool:
        """``Session_tracker::enabled_any``."""
        return (
            self.sysvars_enabled
            or self.schema_enabled
            or self.state_enabled
            or self.gtids_enabled
            or self.transaction.enabled
        )

    def changed_any(self) -> bool:
        """``Session_tracker::changed_any``."""
        return (
            bool(self._changed_vars)
            or self.schema_changed
            or self.state_changed
            or self.gtids_changed
            or self.transaction.changed
        )

    def store(self) -> list[SessionStateChange]:
        """The blocks of every changed tracker, in mysqld's order; resets their flags."""
        blocks: list[SessionStateChange] = []
        if self._changed_vars:
            for name in sorted(self._changed_vars):
                blocks.append(SystemVariable(name, self._value_of(name)))
            self._changed_vars.clear()
        if self.schema_changed:
            blocks.append(Schema(self._schema() or ""))
            self.schema_changed = False
        if self.state_changed:
            blocks.append(StateChange(True))
            self.state_changed = False
        if self.gtids_changed:
            if self.collector.registered and self.collector.collected:
                blocks.append(Gtids(str(self.collector.collected)))
            self.gtids_changed = False
            if not self.gtids_enabled and self.collector.registered:
                self.collector.unregister()
        if self.transaction.changed:
            blocks.extend(self.transaction.store())
        return blocks

    def respond(self, *, can_store: bool) -> tuple[tuple[SessionStateChange, ...], bool]:
        """End of one response packet: the blocks it carries and whether
        ``SESSION_STATE_CHANGED`` is set.  ``can_store`` is false when the response cannot
        carry state (client without ``CLIENT_SESSION_TRACK``, an ERR, or a result set ended
        by a classic EOF): the trackers then stay changed and report with a later OK."""
        blocks: tuple[SessionStateChange, ...] = ()
        changed = False
        if can_store and self.enabled_any() and self.changed_any():
            blocks = tuple(self.store())
            changed = True
        self.collector.after_response(self.gtids_mode)
        return blocks, changed
