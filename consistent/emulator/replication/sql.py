"""Replication statements: CHANGE REPLICATION SOURCE, START/STOP/RESET REPLICA, SHOW REPLICA STATUS.

Both spellings work: ``CHANGE REPLICATION SOURCE TO SOURCE_DELAY = n`` and
``CHANGE MASTER TO MASTER_DELAY = n``, ``START REPLICA`` and ``START SLAVE``, ``SHOW REPLICA
STATUS`` (8.0.22+ column names) and ``SHOW SLAVE STATUS`` (the old names).  ``FOR CHANNEL
'name'`` picks a channel; without it START/STOP act on every channel.

``SOURCE_DELAY`` takes 0 .. 2^31-1: a negative or non-numeric value is a parse error (1064),
a larger one 1729 (reference §6.2).  The source named by ``SOURCE_HOST``/``SOURCE_PORT`` must
be another emulated server of the same topology (or the receiver reports 2003 and retries).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from consistent.emulator.errors import SqlError
from consistent.emulator.replication.channel import Channel
from consistent.emulator.replication.delay import check_delay
from consistent.emulator.results import Column, ResultSet, StmtResult, bigint_column, text_column
from consistent.emulator.sql.lexer import Statement, Tok, TokenStream
from consistent.emulator.statements import Kind
from consistent.errnos import ER

if TYPE_CHECKING:
    from consistent.emulator.replication.service import ReplicationService
    from consistent.emulator.session import Session

__all__ = ["install", "replica_status_rows"]


def _error(code: int, message: str) -> SqlError:
    return SqlError(code, message, "HY000")


# ----- parsing helpers ---------------------------------------------------------------------


def _verb(ts: TokenStream) -> None:
    """``REPLICA`` or ``SLAVE`` after the leading keyword."""
    ts.next()
    if not (ts.accept("REPLICA") or ts.accept("SLAVE")):
        raise ts.error()


def _for_channel(ts: TokenStream) -> str | None:
    if ts.accept("FOR", "CHANNEL"):
        name = ts.string()
        if len(name) > 64:
            raise _error(
                ER.REPLICA_CHANNEL_NAME_INVALID_OR_TOO_LONG,
                "Invalid channel name. Channel name must be 64 characters or less.",
            )
        return name.lower()
    return None


def _targets(service: ReplicationService, name: str | None) -> list[Channel]:
    if name is not None:
        channel = service.channel(name)
        if channel is None or not channel.config.host:
            raise _error(
                ER.REPLICA_CHANNEL_DOES_NOT_EXIST,
                f"Replica channel '{name}' does not exist.",
            )
        return [channel]
    channels = service.configured()
    if not channels:
        raise _error(
            ER.BAD_REPLICA,
            "The server is not configured as replica; fix in config file or with CHANGE "
            "REPLICATION SOURCE TO",
        )
    return channels


def _threads(ts: TokenStream) -> tuple[bool, bool]:
    io = sql = False
    while ts.peek_upper() in ("IO_THREAD", "SQL_THREAD", "RELAY_THREAD"):
        word = ts.next().upper
        if word == "SQL_THREAD":
            sql = True
        else:
            io = True
        if not ts.accept(","):
            break
    if not io and not sql:
        return True, True
    return io, sql


# ----- CHANGE REPLICATION SOURCE / CHANGE MASTER ------------------------------------------------


def _option_name(word: str) -> str:
    if word.startswith("MASTER_"):
        return "SOURCE_" + word[len("MASTER_") :]
    return word


def _int_value(ts: TokenStream) -> int:
    token = ts.next()
    if token.kind is not Tok.NUMBER or not token.text.isdigit():
        raise ts.error(token)
    return int(token.text)


def _delay_value(ts: TokenStream) -> int:
    token = ts.next()
    if token.kind is not Tok.NUMBER:
        raise ts.error(token)
    try:
        return check_delay(token.text)
    except SqlError as exc:
        if exc.code == ER.PARSE_ERROR:
            raise ts.error(token) from None
        raise


_Setter = Callable[[TokenStream, dict[str, Any]], None]

_CONNECTION_OPTIONS: Final = frozenset(
    {"host", "port", "user", "password", "auto_position", "connect_retry", "retry_count"}
)


def _set(key: str, reader: Callable[[TokenStream], object]) -> _Setter:
    def setter(ts: TokenStream, changes: dict[str, Any]) -> None:
        changes[key] = reader(ts)

    return setter


def _ignored(ts: TokenStream, changes: dict[str, Any]) -> None:
    ts.next()


_OPTIONS: Final[dict[str, _Setter]] = {
    "SOURCE_HOST": _set("host", lambda ts: ts.string()),
    "SOURCE_PORT": _set("port", _int_value),
    "SOURCE_USER": _set("user", lambda ts: ts.string()),
    "SOURCE_PASSWORD": _set("password", lambda ts: ts.string()),
    "SOURCE_AUTO_POSITION": _set("auto_position", lambda ts: bool(_int_value(ts))),
    "SOURCE_DELAY": _set("delay", _delay_value),
    "SOURCE_CONNECT_RETRY": _set("connect_retry", _int_value),
    "SOURCE_RETRY_COUNT": _set("retry_count", _int_value),
    "SOURCE_HEARTBEAT_PERIOD": _set("heartbeat_period", lambda ts: float(ts.next().text)),
    "SOURCE_SSL": _ignored,
    "SOURCE_SSL_VERIFY_SERVER_CERT": _ignored,
    "GET_SOURCE_PUBLIC_KEY": _ignored,
    "SOURCE_LOG_FILE": _ignored,
    "SOURCE_LOG_POS": _ignored,
    "RELAY_LOG_FILE": _ignored,
    "RELAY_LOG_POS": _ignored,
    "SOURCE_COMPRESSION_ALGORITHMS": _ignored,
    "PRIVILEGE_CHECKS_USER": _ignored,
    "REQUIRE_ROW_FORMAT": _ignored,
}


def _parse_change(statement: Statement) -> tuple[dict[str, Any], str]:
    ts = TokenStream(statement)
    ts.expect("CHANGE")
    if not (ts.accept("REPLICATION", "SOURCE") or ts.accept("MASTER")):
        raise ts.error()
    ts.expect("TO")
    changes: dict[str, Any] = {}
    while True:
        token = ts.next()
        setter = _OPTIONS.get(_option_name(token.upper))
        if setter is None or token.kind is not Tok.WORD:
            raise ts.error(token)
        ts.expect("=")
        setter(ts, changes)
        if not ts.accept(","):
            break
    name = _for_channel(ts) or ""
    ts.expect_end()
    return changes, name


def _change_handler(service: ReplicationService) -> Callable[..., Awaitable[StmtResult]]:
    async def change(session: Session, statement: Statement) -> StmtResult:
        changes, name = _parse_change(statement)
        channel = service.channel(name)
        if channel is not None:
            if channel.io_running and _CONNECTION_OPTIONS & changes.keys():
                raise _error(
                    ER.REPLICA_CHANNEL_IO_THREAD_MUST_STOP,
                    "This operation cannot be performed with a running replica io thread; "
                    f"run STOP REPLICA IO_THREAD FOR CHANNEL '{name}' first.",
                )
            if channel.sql_running and "delay" in changes:
                raise _error(
                    ER.REPLICA_CHANNEL_SQL_THREAD_MUST_STOP,
                    "This operation cannot be performed with a running replica sql thread; "
                    f"run STOP REPLICA SQL_THREAD FOR CHANNEL '{name}' first.",
                )
        channel = service.add_channel(name)
        channel.config = replace(channel.config, **changes)
        return StmtResult()

    return change


# ----- START / STOP / RESET -----------------------------------------------------------------------


def _start_handler(service: ReplicationService) -> Callable[..., Awaitable[StmtResult]]:
    async def start(session: Session, statement: Statement) -> StmtResult:
        ts = TokenStream(statement)
        _verb(ts)
        io, sql = _threads(ts)
        while ts.peek_upper() in ("USER", "PASSWORD", "DEFAULT_AUTH", "PLUGIN_DIR"):
            ts.next()
            ts.expect("=")
            ts.string()
        name = _for_channel(ts)
        ts.expect_end()
        for channel in _targets(service, name):
            if not await channel.start(io=io, sql=sql):
                session.warn(
                    ER.REPLICA_CHANNEL_WAS_RUNNING,
                    f"Replication thread(s) for channel '{channel.name}' are already runnning.",
                    "Note",
                )
        return StmtResult()

    return start


def _stop_handler(service: ReplicationService) -> Callable[..., Awaitable[StmtResult]]:
    async def stop(session: Session, statement: Statement) -> StmtResult:
        ts = TokenStream(statement)
        _verb(ts)
        io, sql = _threads(ts)
        name = _for_channel(ts)
        ts.expect_end()
        for channel in _targets(service, name):
            if not await channel.stop(io=io, sql=sql):
                session.warn(
                    ER.REPLICA_CHANNEL_WAS_NOT_RUNNING,
                    f"Replication thread(s) for channel '{channel.name}' are already stopped.",
                    "Note",
                )
        return StmtResult()

    return stop


def _reset_handler(service: ReplicationService) -> Callable[..., Awaitable[StmtResult]]:
    async def reset(session: Session, statement: Statement) -> StmtResult:
        ts = TokenStream(statement)
        _verb(ts)
        remove = ts.accept("ALL")
        name = _for_channel(ts)
        ts.expect_end()
        if name is None:
            channels = list(service.channels.values())
        else:
            found = service.channel(name)
            if found is None:
                raise _error(
                    ER.REPLICA_CHANNEL_DOES_NOT_EXIST,
                    f"Replica channel '{name}' does not exist.",
                )
            channels = [found]
        for channel in channels:
            if channel.io_running or channel.sql_running:
                raise _error(
                    ER.REPLICA_CHANNEL_MUST_STOP,
                    "This operation cannot be performed with running replication threads; "
                    f"run STOP REPLICA FOR CHANNEL '{channel.name}' first",
                )
        for channel in channels:
            channel.reset()
            if remove:
                service.remove_channel(channel.name)
        return StmtResult()

    return reset


# ----- SHOW REPLICA STATUS ----------------------------------------------------------------------

#: Columns of SHOW REPLICA STATUS (8.0.22+), "i" marks integer columns.
_STATUS_COLUMNS: Final = [
    "Replica_IO_State",
    "Source_Host",
    "Source_User",
    "Source_Port:i",
    "Connect_Retry:i",
    "Source_Log_File",
    "Read_Source_Log_Pos:i",
    "Relay_Log_File",
    "Relay_Log_Pos:i",
    "Relay_Source_Log_File",
    "Replica_IO_Running",
    "Replica_SQL_Running",
    "Replicate_Do_DB",
    "Replicate_Ignore_DB",
    "Replicate_Do_Table",
    "Replicate_Ignore_Table",
    "Replicate_Wild_Do_Table",
    "Replicate_Wild_Ignore_Table",
    "Last_Errno:i",
    "Last_Error",
    "Skip_Counter:i",
    "Exec_Source_Log_Pos:i",
    "Relay_Log_Space:i",
    "Until_Condition",
    "Until_Log_File",
    "Until_Log_Pos:i",
    "Source_SSL_Allowed",
    "Source_SSL_CA_File",
    "Source_SSL_CA_Path",
    "Source_SSL_Cert",
    "Source_SSL_Cipher",
    "Source_SSL_Key",
    "Seconds_Behind_Source:i",
    "Source_SSL_Verify_Server_Cert",
    "Last_IO_Errno:i",
    "Last_IO_Error",
    "Last_SQL_Errno:i",
    "Last_SQL_Error",
    "Replicate_Ignore_Server_Ids",
    "Source_Server_Id:i",
    "Source_UUID",
    "Source_Info_File",
    "SQL_Delay:i",
    "SQL_Remaining_Delay:i",
    "Replica_SQL_Running_State",
    "Source_Retry_Count:i",
    "Source_Bind",
    "Last_IO_Error_Timestamp",
    "Last_SQL_Error_Timestamp",
    "Source_SSL_Crl",
    "Source_SSL_Crlpath",
    "Retrieved_Gtid_Set",
    "Executed_Gtid_Set",
    "Auto_Position:i",
    "Replicate_Rewrite_DB",
    "Channel_Name",
    "Source_TLS_Version",
    "Source_public_key_path",
    "Get_Source_public_key:i",
    "Network_Namespace",
]

#: SHOW SLAVE STATUS names that are not a plain Source→Master, Replica→Slave rename.
_LEGACY: Final = {
    "Relay_Source_Log_File": "Relay_Master_Log_File",
    "Source_public_key_path": "Master_public_key_path",
    "Get_Source_public_key": "Get_master_public_key",
}


def _legacy_name(name: str) -> str:
    if name in _LEGACY:
        return _LEGACY[name]
    return name.replace("Source", "Master").replace("Replica", "Slave")


def _columns(legacy: bool) -> tuple[Column, ...]:
    columns = []
    for spec in _STATUS_COLUMNS:
        name, _, kind = spec.partition(":")
        if legacy:
            name = _legacy_name(name)
        if kind == "i":
            columns.append(bigint_column(name))
        else:
            columns.append(text_column(name, 1024 if name.endswith("Gtid_Set") else 64))
    return tuple(columns)


def _error_time(timestamp_us: int, session: Session) -> str:
    if not timestamp_us:
        return ""
    moment = datetime.fromtimestamp(timestamp_us / 1_000_000, session.time_zone())
    return moment.strftime("%y%m%d %H:%M:%S")


def replica_status_rows(
    service: ReplicationService, session: Session, name: str | None
) -> list[tuple[object, ...]]:
    """One SHOW REPLICA STATUS row per configured channel (or the one named)."""
    channels = service.configured()
    if name is not None:
        channels = [c for c in channels if c.name == name]
    executed = str(service.server.gtid_state.executed)
    rows: list[tuple[object, ...]] = []
    host = service.server.config.hostname
    for c in channels:
        config = c.config
        suffix = f"-{c.name}" if c.name else ""
        relay_file = f"{host}-relay-bin{suffix}.000002"
        last_sql = c.sql_error
        values: dict[str, object] = {
            "Replica_IO_State": c.io_stage,
            "Source_Host": config.host,
            "Source_User": config.user,
            "Source_Port": config.port,
            "Connect_Retry": config.connect_retry,
            "Source_Log_File": c.source_log_file,
            "Read_Source_Log_Pos": c.source_log_pos,
            "Relay_Log_File": relay_file,
            "Relay_Log_Pos": 4 + 100 * c.applied_count,
            "Relay_Source_Log_File": c.source_log_file,
            "Replica_IO_Running": "Yes"
            if c.io_state.value == "ON"
            else ("Connecting" if c.io_running else "No"),
            "Replica_SQL_Running": "Yes" if c.sql_running else "No",
            "Last_Errno": last_sql.number,
            "Last_Error": last_sql.message,
            "Skip_Counter": 0,
            "Exec_Source_Log_Pos": c.source_log_pos if not c.pending() else 4,
            "Relay_Log_Space": 157 + 100 * len(c.relay),
            "Until_Condition": "None",
            "Until_Log_Pos": 0,
            "Source_SSL_Allowed": "No",
            "Seconds_Behind_Source": c.seconds_behind_source(),
            "Source_SSL_Verify_Server_Cert": "No",
            "Last_IO_Errno": c.io_error.number,
            "Last_IO_Error": c.io_error.message,
            "Last_SQL_Errno": last_sql.number,
            "Last_SQL_Error": last_sql.message,
            "Source_Server_Id": c.source_server_id,
            "Source_UUID": c.source_uuid,
            "Source_Info_File": "mysql.slave_master_info",
            "SQL_Delay": config.delay,
            "SQL_Remaining_Delay": c.remaining_delay(),
            "Replica_SQL_Running_State": c.sql_stage,
            "Source_Retry_Count": config.retry_count,
            "Last_IO_Error_Timestamp": _error_time(c.io_error.timestamp, session),
            "Last_SQL_Error_Timestamp": _error_time(last_sql.timestamp, session),
            "Retrieved_Gtid_Set": str(c.retrieved),
            "Executed_Gtid_Set": executed,
            "Auto_Position": int(config.auto_position),
            "Channel_Name": c.name,
            "Get_Source_public_key": 0,
        }
        row = []
        for spec in _STATUS_COLUMNS:
            column = spec.partition(":")[0]
            row.append(values.get(column, ""))
        rows.append(tuple(row))
    return rows


def _show_handler(
    service: ReplicationService, legacy: bool
) -> Callable[[Session, TokenStream], Awaitable[StmtResult]]:
    async def show(session: Session, ts: TokenStream) -> StmtResult:
        if ts.accept("NONBLOCKING"):
            pass
        name = _for_channel(ts)
        ts.expect_end()
        rows = replica_status_rows(service, session, name)
        return StmtResult(result=ResultSet(_columns(legacy), tuple(rows)))

    return show


def install(service: ReplicationService) -> None:
    """Register the statements and SHOW forms on ``service.server``."""
    handlers = service.server.statement_handlers
    change = _change_handler(service)
    start, stop, reset = _start_handler(service), _stop_handler(service), _reset_handler(service)
    for key, handler in (
        ("CHANGE REPLICATION", change),
        ("CHANGE MASTER", change),
        ("START REPLICA", start),
        ("START SLAVE", start),
        ("STOP REPLICA", stop),
        ("STOP SLAVE", stop),
        ("RESET REPLICA", reset),
        ("RESET SLAVE", reset),
    ):
        handlers[key] = (handler, Kind.ADMIN)
    shows = service.server.show_handlers
    shows["REPLICA STATUS"] = _show_handler(service, legacy=False)
    shows["SLAVE STATUS"] = _show_handler(service, legacy=True)
