"""Reading and assigning system variables with mysqld's side effects and checks.

Most variables are plain values; the ones here are computed (``gtid_executed``,
``warning_count``) or act when assigned: ``autocommit`` commits, ``session_track_*``
reconfigure the trackers (``session_track_gtids`` refuses inside a transaction with 1766 and
while a GTID is owned with 3138), ``gtid_next`` takes GTID ownership, ``gtid_purged`` and
``gtid_mode`` change the server's GTID state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from consistent.emulator.config import GtidMode
from consistent.emulator.errors import ER, sql_error
from consistent.emulator.gtid_state import GtidNext, GtidNextType
from consistent.emulator.sql.functions import timezone_for
from consistent.emulator.tracker import TrackGtids, TrackTransactionInfo
from consistent.emulator.variables import SYSTEM_VARIABLES, SysVar, lookup, read_only_error
from consistent.errors import MalformedGtidSet
from consistent.gtid import GtidSet

if TYPE_CHECKING:
    from consistent.emulator.session import Session

__all__ = ["CHARSETS", "COLLATIONS", "GETTERS", "assign"]

#: Character sets the emulator accepts, with their default collation (SHOW CHARACTER SET).
CHARSETS: Final = {
    "utf8mb4": ("utf8mb4_0900_ai_ci", "UTF-8 Unicode", 4),
    "utf8mb3": ("utf8mb3_general_ci", "UTF-8 Unicode", 3),
    "utf8": ("utf8mb3_general_ci", "UTF-8 Unicode", 3),
    "latin1": ("latin1_swedish_ci", "cp1252 West European", 1),
    "ascii": ("ascii_general_ci", "US ASCII", 1),
    "binary": ("binary", "Binary pseudo charset", 1),
}

#: Collations (SHOW COLLATION): name -> (charset, id, is default).
COLLATIONS: Final = {
    "utf8mb4_0900_ai_ci": ("utf8mb4", 255, True),
    "utf8mb4_general_ci": ("utf8mb4", 45, False),
    "utf8mb4_bin": ("utf8mb4", 46, False),
    "utf8mb4_unicode_ci": ("utf8mb4", 224, False),
    "utf8mb4_0900_bin": ("utf8mb4", 309, False),
    "utf8mb3_general_ci": ("utf8mb3", 33, True),
    "utf8mb3_bin": ("utf8mb3", 83, False),
    "latin1_swedish_ci": ("latin1", 8, True),
    "latin1_bin": ("latin1", 47, False),
    "ascii_general_ci": ("ascii", 11, True),
    "binary": ("binary", 63, True),
}

Getter = Callable[["Session", bool], object]


def _owned(session: Session, global_scope: bool) -> object:
    if global_scope:
        return session.server.gtid_state.owned_text()
    if session.owned_gtid is not None:
        return str(session.owned_gtid)
    return "ANONYMOUS" if session.owns_anonymous else ""


def _timestamp(session: Session, global_scope: bool) -> object:
    value = session.vars.get("timestamp")
    if isinstance(value, float) and value > 0:
        return value
    return round(session.statement_time(), 6)


GETTERS: Final[dict[str, Getter]] = {
    "gtid_executed": lambda s, g: str(s.server.gtid_state.executed),
    "gtid_purged": lambda s, g: str(s.server.gtid_state.purged),
    "gtid_owned": _owned,
    "gtid_next": lambda s, g: str(s.gtid_next),
    "gtid_mode": lambda s, g: s.server.gtid_state.mode.value,
    "warning_count": lambda s, g: len(s.warnings),
    "error_count": lambda s, g: s.errors,
    "last_insert_id": lambda s, g: s.last_insert_id,
    "identity": lambda s, g: s.last_insert_id,
    "timestamp": _timestamp,
}


def _check_outside_transaction(session: Session, var: SysVar) -> None:
    """``check_outside_trx``: 1766 inside a transaction, 3138 while owning a GTID."""
    if session.in_txn:
        raise sql_error(ER.VARIABLE_NOT_SETTABLE_IN_TRANSACTION, var.name)
    owned = session.owned_gtid
    if session.owns_gtid:
        raise sql_error(
            ER.CANT_SET_VARIABLE_WHEN_OWNING_GTID,
            var.name,
            str(owned) if owned is not None else "ANONYMOUS",
        )


Setter = Callable[["Session", SysVar, object, bool], Awaitable[None]]


async def _autocommit(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    new = bool(var.coerce(value))
    if global_scope:
        session.server.global_vars[var.name] = new
        return
    if new and not session.autocommit:
        await session.implicit_commit()
    session.vars[var.name] = new
    session.trackers.variable_changed(var.name)


async def _track_gtids(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    stored = var.coerce(value)
    if global_scope:
        session.server.global_vars[var.name] = stored
        return
    _check_outside_transaction(session, var)
    session.vars[var.name] = stored
    session.trackers.set_gtids_tracking(TrackGtids[str(stored)])
    session.trackers.variable_changed(var.name)


async def _track_schema(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    stored = var.coerce(value)
    _store(session, var, stored, global_scope)
    if not global_scope:
        session.trackers.set_schema_tracking(bool(stored))


async def _track_state(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    stored = var.coerce(value)
    _store(session, var, stored, global_scope)
    if not global_scope:
        session.trackers.set_state_tracking(bool(stored))


async def _track_sysvars(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    stored = var.coerce(value)
    text = "" if stored is None else str(stored)
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name != "*" and name.lower() not in _known():
            session.warn(
                int(ER.WRONG_VALUE_FOR_VAR),
                f"{name} is not a valid system variable and will be ignored.",
            )
    _store(session, var, stored, global_scope)
    if not global_scope:
        session.trackers.set_tracked_variables(text)


def _known() -> frozenset[str]:
    return frozenset(SYSTEM_VARIABLES)


async def _track_trx(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    stored = var.coerce(value)
    _store(session, var, stored, global_scope)
    if not global_scope:
        session.trackers.transaction.update(TrackTransactionInfo[str(stored)])


async def _gtid_next(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    if value is None:
        raise sql_error(ER.WRONG_VALUE_FOR_VAR, var.name, "NULL")
    if not isinstance(value, str | bytes):
        raise sql_error(ER.WRONG_TYPE_FOR_VAR, var.name)
    text = value.decode() if isinstance(value, bytes) else value
    spec = GtidNext.parse(text, tags=session.server.config.gtid_tags)
    if session.in_txn:
        raise sql_error(ER.VARIABLE_NOT_SETTABLE_IN_TRANSACTION, var.name)
    if session.owns_gtid:
        held = str(session.owned_gtid) if session.owned_gtid is not None else "ANONYMOUS"
        raise sql_error(ER.CANT_SET_GTID_NEXT_WHEN_OWNING_GTID, held)
    state = session.server.gtid_state
    if spec.type is GtidNextType.ANONYMOUS and state.mode is GtidMode.ON:
        raise sql_error(ER.CANT_SET_GTID_NEXT_TO_ANONYMOUS_WHEN_GTID_MODE_IS_ON)
    if spec.type is GtidNextType.ASSIGNED and state.mode is GtidMode.OFF:
        raise sql_error(ER.CANT_SET_GTID_NEXT_TO_GTID_WHEN_GTID_MODE_IS_OFF)
    session.gtid_next = spec
    session.skip_transaction = False
    session.owns_anonymous = spec.type is GtidNextType.ANONYMOUS
    if spec.gtid is not None:
        owned = state.try_acquire(spec.gtid, session.connection_id)
        if owned is None:  # another session owns it: wait (KILL QUERY interrupts)
            owned = await session.interruptible(
                state.acquire(spec.gtid, session.connection_id), None
            )
        if owned:
            session.owned_gtid = spec.gtid
        else:
            session.skip_transaction = True
    session.trackers.variable_changed(var.name)


async def _gtid_purged(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    if not global_scope:
        raise sql_error(ER.GLOBAL_VARIABLE, var.name)
    if value is None or not isinstance(value, str | bytes):
        raise sql_error(
            ER.WRONG_TYPE_FOR_VAR if value is not None else ER.WRONG_VALUE_FOR_VAR,
            *((var.name,) if value is not None else (var.name, "NULL")),
        )
    text = value.decode() if isinstance(value, bytes) else value
    try:
        gtids, plus = GtidSet.parse_with_plus(text, tags=session.server.config.gtid_tags)
    except MalformedGtidSet as exc:
        raise sql_error(ER.MALFORMED_GTID_SET_SPECIFICATION, text[:200]) from exc
    await session.server.add_gtid_purged(gtids, plus=plus)


async def _gtid_mode(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    if not global_scope:
        raise sql_error(ER.GLOBAL_VARIABLE, var.name)
    new = GtidMode(str(var.coerce(value)))
    state = session.server.gtid_state
    if abs(new.step - state.mode.step) > 1:
        raise sql_error(ER.GTID_MODE_CAN_ONLY_CHANGE_ONE_STEP_AT_A_TIME)
    if new is GtidMode.ON and session.server.global_vars["enforce_gtid_consistency"] != "ON":
        raise sql_error(ER.GTID_MODE_ON_REQUIRES_ENFORCE_GTID_CONSISTENCY_ON)
    state.mode = new
    session.server.global_vars[var.name] = new.value


async def _time_zone(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    stored = var.coerce(value)
    if timezone_for(str(stored)) is None and str(stored).upper() != "SYSTEM":
        raise sql_error(ER.UNKNOWN_TIME_ZONE, str(stored))
    _store(session, var, stored, global_scope)


async def _charset(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    stored = var.coerce(value)
    if stored is not None:
        name = str(stored).lower()
        if name not in CHARSETS:
            raise sql_error(ER.UNKNOWN_CHARACTER_SET, str(stored))
        stored = "utf8mb3" if name == "utf8" else name
    _store(session, var, stored, global_scope)
    if var.name == "character_set_connection":
        await _store_async(session, "collation_connection", CHARSETS[str(stored)][0], global_scope)


async def _collation(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    stored = str(var.coerce(value)).lower()
    if stored not in COLLATIONS:
        raise sql_error(ER.UNKNOWN_COLLATION, stored)
    _store(session, var, stored, global_scope)


async def _timestamp_set(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    stored = var.coerce(value)
    _store(session, var, float(stored) if isinstance(stored, int | float) else 0.0, global_scope)


async def _foreign_keys(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    stored = var.coerce(value)
    _store(session, var, stored, global_scope)
    if not global_scope:
        session.store.conn.execute(f"PRAGMA foreign_keys={'ON' if stored else 'OFF'}")


async def _last_insert_id(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    stored = var.coerce(value)
    session.set_last_insert_id(int(str(stored)))
    session.trackers.variable_changed(var.name)


async def _isolation(session: Session, var: SysVar, value: object, global_scope: bool) -> None:
    text = value.decode() if isinstance(value, bytes) else value
    if isinstance(text, str):
        text = text.replace(" ", "-")
    _store(session, var, var.coerce(text), global_scope)


SETTERS: Final[dict[str, Setter]] = {
    "autocommit": _autocommit,
    "session_track_gtids": _track_gtids,
    "session_track_schema": _track_schema,
    "session_track_state_change": _track_state,
    "session_track_system_variables": _track_sysvars,
    "session_track_transaction_info": _track_trx,
    "gtid_next": _gtid_next,
    "gtid_purged": _gtid_purged,
    "gtid_mode": _gtid_mode,
    "time_zone": _time_zone,
    "character_set_client": _charset,
    "character_set_connection": _charset,
    "character_set_results": _charset,
    "character_set_server": _charset,
    "character_set_database": _charset,
    "collation_connection": _collation,
    "collation_server": _collation,
    "collation_database": _collation,
    "timestamp": _timestamp_set,
    "foreign_key_checks": _foreign_keys,
    "last_insert_id": _last_insert_id,
    "identity": _last_insert_id,
    "transaction_isolation": _isolation,
}


def _store(session: Session, var: SysVar, stored: object, global_scope: bool) -> None:
    if global_scope:
        session.server.global_vars[var.name] = stored
    else:
        session.vars[var.name] = stored
        session.trackers.variable_changed(var.name)


async def _store_async(session: Session, name: str, value: object, global_scope: bool) -> None:
    _store(session, lookup(name), value, global_scope)


async def assign(session: Session, name: str, value: object, *, global_scope: bool) -> None:
    """SET [GLOBAL|SESSION] ``name`` = ``value`` with mysqld's scope and value checks."""
    var = lookup(name)
    if global_scope and not var.has_global:
        raise sql_error(ER.LOCAL_VARIABLE, var.name)
    if not global_scope and not var.has_session:
        raise sql_error(ER.GLOBAL_VARIABLE, var.name)
    if var.read_only:
        raise read_only_error(var)
    setter = SETTERS.get(var.name)
    if setter is not None:
        await setter(session, var, value, global_scope)
        return
    warnings: list[tuple[int, str]] = []
    stored = var.coerce(value, warnings)
    for code, text in warnings:
        name_part, _, number = text.partition(":")
        session.warn(code, f"Truncated incorrect {name_part} value: '{number}'")
    _store(session, var, stored, global_scope)


def default_value(session: Session, name: str, *, global_scope: bool) -> object:
    """The value ``SET x = DEFAULT`` assigns: the global value for a session variable,
    the compiled default for a global one."""
    var = lookup(name)
    if global_scope or not var.has_global:
        return var.default
    return session.server.global_vars[var.name]
