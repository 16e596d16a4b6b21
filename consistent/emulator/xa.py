"""XA transactions as MySQL 8.0 runs them with GTIDs and ``xa_detach_on_prepare=ON``.

The statements (``sql/xa.cc``; errors from ``share/messages_to_clients.txt``):

* ``XA START|BEGIN xid``: only outside a transaction (1400 XAER_OUTSIDE inside a local one,
  1399 XAER_RMFAIL naming the XA state inside another XA one), not for an XID that exists
  (1440 XAER_DUPID); ``JOIN`` and ``RESUME`` (but for ``RESUME`` of the session's own IDLE
  XID) are 1398 XAER_INVAL.
* ``XA END xid``: ACTIVE → IDLE (1399 in another state, 1397 XAER_NOTA for another XID).
* ``XA PREPARE xid``: IDLE → PREPARED.  The transaction is logged with its own GTID (``XA
  START``, its statements, ``XA END``, ``XA PREPARE``) and *detached*: the session is free,
  and the prepared transaction survives its disconnect until some session commits or rolls
  it back.
* ``XA COMMIT xid``: of a prepared transaction, logged as a transaction of its own with
  another GTID; ``XA COMMIT xid ONE PHASE`` of the session's IDLE one commits it like COMMIT
  (one GTID).
* ``XA ROLLBACK xid``: of a prepared transaction, logged with a GTID; of the session's IDLE
  one, nothing is logged.
* ``XA RECOVER [CONVERT XID]``: the prepared transactions.

Inside an ACTIVE XA transaction, COMMIT, ROLLBACK, BEGIN and statements that commit implicitly
fail with 1399; in IDLE, so does anything that reads or writes a table.

A prepared transaction keeps the SQLite transaction that holds its changes (and, having
written, the emulator's single writer lock, as any open write transaction does: other writers
wait until it is committed or rolled back).  Its GTID rows reach ``mysql.gtid_executed`` with
the commit or rollback that ends it.  A server restart forgets prepared transactions.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Final

from consistent.emulator import gtid_table
from consistent.emulator.binlog import BinlogStatement
from consistent.emulator.errors import ER, SqlError, sql_error
from consistent.emulator.results import Column, ResultSet, StmtResult, bigint_column, text_column
from consistent.emulator.sql import functions
from consistent.emulator.sql.lexer import Statement, Tok, TokenStream
from consistent.emulator.sql.storage import SessionStore
from consistent.emulator.tracker import TxState
from consistent.gtid import Gtid, GtidSet

if TYPE_CHECKING:
    from consistent.emulator.session import Session

__all__ = ["PreparedXa", "XaRegistry", "XaState", "Xid", "parse_xid", "run_xa"]

#: ``XIDDATASIZE``: gtrid and bqual together hold at most 128 bytes, each at most 64.
_MAX_PART = 64


class XaState(Enum):
    """``XID_STATE::xa_state_names``."""

    NOTR = "NON-EXISTING"
    ACTIVE = "ACTIVE"
    IDLE = "IDLE"
    PREPARED = "PREPARED"


@dataclass(frozen=True)
class Xid:
    """An XA transaction id: ``gtrid [, bqual [, formatID]]``."""

    gtrid: bytes
    bqual: bytes = b""
    format_id: int = 1

    def sql(self) -> str:
        """The form the binary log writes: ``X'…',X'…',formatID``."""
        return f"X'{self.gtrid.hex()}',X'{self.bqual.hex()}',{self.format_id}"


@dataclass
class PreparedXa:
    """A detached prepared transaction: its XID, open store and GTIDs not yet in the table."""

    xid: Xid
    store: SessionStore
    gtids: list[Gtid] = field(default_factory=list)


class XaRegistry:
    """The server's XA transactions (``transaction_cache``): prepared ones and the XIDs
    sessions have started."""

    def __init__(self) -> None:
        self.prepared: dict[Xid, PreparedXa] = {}
        self.active: dict[Xid, int] = {}

    def exists(self, xid: Xid) -> bool:
        """Whether ``xid`` is taken (prepared, or started by a session)."""
        return xid in self.prepared or xid in self.active

    def forget(self) -> None:
        """A restart: prepared transactions are gone with the SQLite connections."""
        self.prepared.clear()
        self.active.clear()


# ----- parsing ------------------------------------------------------------------------------


def _part(ts: TokenStream) -> bytes:
    token = ts.next()
    if token.kind is Tok.WORD and token.upper == "X":
        literal = ts.next()
        if literal.kind is not Tok.STRING:
            raise ts.error(literal)
        try:
            return bytes.fromhex(literal.value)
        except ValueError:
            raise ts.error(token) from None
    if token.kind is Tok.NUMBER and token.text.lower().startswith("0x"):
        digits = token.text[2:]
        try:
            return bytes.fromhex(digits if len(digits) % 2 == 0 else "0" + digits)
        except ValueError:
            raise ts.error(token) from None
    if token.kind is Tok.STRING:
        return token.value.encode()
    raise ts.error(token)


def parse_xid(ts: TokenStream) -> Xid:
    """``gtrid [, bqual [, formatID]]`` (1064 for anything else, 1398 for parts too long)."""
    gtrid = _part(ts)
    bqual = b""
    format_id = 1
    if ts.accept(","):
        bqual = _part(ts)
        if ts.accept(","):
            format_id = ts.number()
    if not gtrid or len(gtrid) > _MAX_PART or len(bqual) > _MAX_PART:
        raise sql_error(ER.XAER_INVAL)
    return Xid(gtrid, bqual, format_id)


# ----- state checks used around every statement ---------------------------------------------


def rmfail(session: Session) -> SqlError:
    """1399 naming the session's XA state."""
    return sql_error(ER.XAER_RMFAIL, session.xa_state.value)


def check_table_access(session: Session) -> None:
    """In IDLE a statement may not touch tables (1399)."""
    if session.xa_state is XaState.IDLE:
        raise rmfail(session)


# ----- statements ---------------------------------------------------------------------------


async def _start(session: Session, ts: TokenStream) -> StmtResult:
    xid = parse_xid(ts)
    option = ""
    if ts.accept("JOIN"):
        option = "JOIN"
    elif ts.accept("RESUME"):
        option = "RESUME"
    ts.expect_end()
    if session.xa_state is XaState.IDLE and option == "RESUME":
        if session.xa_xid != xid:
            raise sql_error(ER.XAER_NOTA)
        session.xa_state = XaState.ACTIVE
        return StmtResult()
    if option:
        raise sql_error(ER.XAER_INVAL)
    if session.xa_state is not XaState.NOTR:
        raise rmfail(session)
    if session.in_txn:
        raise sql_error(ER.XAER_OUTSIDE)
    registry = session.server.xa
    if registry.exists(xid):
        raise sql_error(ER.XAER_DUPID)
    session.begin_explicit(read_only=None, snapshot=False)
    registry.active[xid] = session.connection_id
    session.xa_state = XaState.ACTIVE
    session.xa_xid = xid
    return StmtResult()


async def _end(session: Session, ts: TokenStream) -> StmtResult:
    xid = parse_xid(ts)
    if ts.accept("SUSPEND"):
        ts.accept("FOR", "MIGRATE")
        ts.expect_end()
        raise sql_error(ER.XAER_INVAL)
    ts.expect_end()
    if session.xa_state is not XaState.ACTIVE:
        raise rmfail(session)
    if session.xa_xid != xid:
        raise sql_error(ER.XAER_NOTA)
    session.xa_state = XaState.IDLE
    return StmtResult()


def _framed(xid: Xid, changes: tuple[BinlogStatement, ...], last: str) -> list[BinlogStatement]:
    return [
        BinlogStatement(f"XA START {xid.sql()}"),
        *changes,
        BinlogStatement(f"XA END {xid.sql()}"),
        BinlogStatement(last),
    ]


async def _prepare(session: Session, ts: TokenStream) -> StmtResult:
    xid = parse_xid(ts)
    ts.expect_end()
    if session.xa_state is not XaState.IDLE:
        raise rmfail(session)
    if session.xa_xid != xid:
        raise sql_error(ER.XAER_NOTA)
    server = session.server
    gtid = session.take_gtid()
    statements = _framed(xid, tuple(session.txn_changes), f"XA PREPARE {xid.sql()}")
    session.log_transaction(tuple(statements), gtid, xa=True)
    prepared = PreparedXa(xid, session.store)
    if gtid is not None:
        server.gtid_state.commit(gtid)
        if session.saves_gtid_rows():
            prepared.gtids.append(gtid)
        session.trackers.collector.after_gtid_executed_update(gtid, system=session.system)
    server.xa.active.pop(xid, None)
    server.xa.prepared[xid] = prepared
    session.store = _fresh_store(session, prepared.store)
    session.xa_state = XaState.NOTR
    session.xa_xid = None
    # The transaction-state tracker keeps "T" until XA COMMIT / XA ROLLBACK
    # (binlog_xa_trx_gtid_response_packet.result).
    session.end_transaction(track=False)
    return StmtResult()


def _fresh_store(session: Session, old: SessionStore) -> SessionStore:
    """A new connection for the session; its temporary tables come along, rows and all."""
    store = SessionStore(session.server.storage)
    functions.register_functions(store.conn, session.functions)
    if not session.vars["foreign_key_checks"]:
        store.conn.execute("PRAGMA foreign_keys=OFF")
    for table in session.temp_tables.values():
        for ddl in table.sqlite_ddl():
            store.conn.execute(ddl)
        rows = old.conn.execute(f"SELECT * FROM temp.{table.sqlite}").fetchall()
        if rows:
            marks = ", ".join("?" for _ in rows[0])
            store.conn.executemany(f"INSERT INTO temp.{table.sqlite} VALUES ({marks})", rows)
    return store


def _own_idle_or_fail(session: Session, xid: Xid) -> bool:
    """Whether ``xid`` is the session's own transaction (then in a state the caller checks)."""
    return session.xa_xid == xid and session.xa_state is not XaState.NOTR


def _detached(session: Session, xid: Xid) -> PreparedXa:
    """``find_trn_for_recover_and_check_its_state``: 1399 unless the session is outside any
    transaction, then 1397 for an XID that is not prepared."""
    if session.xa_state is not XaState.NOTR or session.in_txn:
        raise rmfail(session)
    prepared = session.server.xa.prepared.get(xid)
    if prepared is None:
        raise sql_error(ER.XAER_NOTA)
    return prepared


async def _commit(session: Session, ts: TokenStream) -> StmtResult:
    xid = parse_xid(ts)
    one_phase = ts.accept("ONE", "PHASE")
    ts.expect_end()
    if _own_idle_or_fail(session, xid):
        if session.xa_state is not XaState.IDLE or not one_phase:
            raise rmfail(session)
        session.server.xa.active.pop(xid, None)
        changes = tuple(session.txn_changes)
        if changes:
            session.txn_changes[:] = _framed(xid, changes, f"XA COMMIT {xid.sql()} ONE PHASE")
        session.xa_state = XaState.NOTR
        session.xa_xid = None
        await session.commit_transaction(xa=True)
        return StmtResult()
    prepared = _detached(session, xid)
    if one_phase:
        raise sql_error(ER.XAER_RMFAIL, XaState.PREPARED.value)
    await _finish(session, prepared, commit=True)
    return StmtResult()


async def _rollback(session: Session, ts: TokenStream) -> StmtResult:
    xid = parse_xid(ts)
    ts.expect_end()
    if _own_idle_or_fail(session, xid):
        if session.xa_state is not XaState.IDLE:
            raise rmfail(session)
        session.server.xa.active.pop(xid, None)
        session.xa_state = XaState.NOTR
        session.xa_xid = None
        session.rollback_transaction()
        return StmtResult()
    prepared = _detached(session, xid)
    await _finish(session, prepared, commit=False)
    return StmtResult()


async def _finish(session: Session, prepared: PreparedXa, *, commit: bool) -> None:
    """XA COMMIT / XA ROLLBACK of a prepared transaction: a transaction of its own."""
    server = session.server
    xid = prepared.xid
    gtid = session.take_gtid()
    rows = [*prepared.gtids]
    if gtid is not None and session.saves_gtid_rows():
        rows.append(gtid)
    store = prepared.store
    del server.xa.prepared[xid]
    if commit:
        if rows:
            await store.begin_write(None)
            gtid_table.insert_set(store.conn, GtidSet(rows), tagged=server.gtid_tagged)
        store.commit()
    else:
        store.rollback()
        if rows:
            await server.run_internal_transaction(
                lambda c: gtid_table.insert_set(c, GtidSet(rows), tagged=server.gtid_tagged)
            )
    _close(store)
    verb = "COMMIT" if commit else "ROLLBACK"
    session.log_transaction((BinlogStatement(f"XA {verb} {xid.sql()}"),), gtid, xa=True)
    if gtid is not None:
        server.gtid_state.commit(gtid)
        session.trackers.collector.after_gtid_executed_update(gtid, system=session.system)
    if rows:
        server.saved_gtids(rows)
    session.end_transaction(track=True)
    session.trackers.transaction.end_trx()


def _close(store: SessionStore) -> None:
    with contextlib.suppress(sqlite3.Error):
        store.conn.close()


_RECOVER_COLUMNS: Final[tuple[Column, ...]] = (
    bigint_column("formatID", nullable=False),
    bigint_column("gtrid_length", nullable=False),
    bigint_column("bqual_length", nullable=False),
    text_column("data", 130, nullable=False),
)


async def _recover(session: Session, ts: TokenStream) -> StmtResult:
    convert = ts.accept("CONVERT", "XID")
    ts.expect_end()
    rows: list[tuple[object, ...]] = []
    for xid in session.server.xa.prepared:
        data = xid.gtrid + xid.bqual
        shown = "0x" + data.hex() if convert else data.decode("utf-8", "replace")
        rows.append((xid.format_id, len(xid.gtrid), len(xid.bqual), shown))
    session.trackers.transaction.add_state(TxState.RESULT_SET, autocommit=session.autocommit)
    return StmtResult(result=ResultSet(_RECOVER_COLUMNS, tuple(rows)))


async def run_xa(session: Session, statement: Statement) -> StmtResult:
    """One ``XA …`` statement."""
    ts = TokenStream(statement)
    ts.expect("XA")
    if ts.accept("START") or ts.accept("BEGIN"):
        return await _start(session, ts)
    if ts.accept("END"):
        return await _end(session, ts)
    if ts.accept("PREPARE"):
        return await _prepare(session, ts)
    if ts.accept("COMMIT"):
        return await _commit(session, ts)
    if ts.accept("ROLLBACK"):
        return await _rollback(session, ts)
    if ts.accept("RECOVER"):
        return await _recover(session, ts)
    raise ts.error()
