"""The PEP 249 module surface and the configuration forms, without a server."""

from __future__ import annotations

import datetime
import socket
from decimal import Decimal

import pymysql.cursors
import pytest

import consistent.dbapi as db
from consistent import errors
from consistent.dbapi.config import ServerSpec, build_config, parse_url
from consistent.dbapi.cursor import cursor_class
from consistent.flavors import MARIADB, MYSQL, ServerRole, flavor_by_name, server_flavor
from consistent.gtid import GtidSet, MariaPosition
from consistent.policy import Level, OnTimeout, Tracking, WaitOutcome
from consistent.protocol.constants import ColumnType

A = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"


def test_module_globals_follow_pep_249() -> None:
    assert db.apilevel == "2.0"
    assert db.threadsafety == 1
    assert db.paramstyle == "pyformat"


@pytest.mark.parametrize(
    "name",
    [
        "Warning",
        "Error",
        "InterfaceError",
        "DatabaseError",
        "DataError",
        "OperationalError",
        "IntegrityError",
        "InternalError",
        "ProgrammingError",
        "NotSupportedError",
    ],
)
def test_exceptions_are_the_projects_own(name: str) -> None:
    assert getattr(db, name) is getattr(errors, name)
    assert getattr(db.Connection, name) is getattr(errors, name)


def test_the_exception_hierarchy_is_pep_249s() -> None:
    assert issubclass(db.Error, Exception)
    assert issubclass(db.Warning, Exception)
    assert issubclass(db.InterfaceError, db.Error)
    assert issubclass(db.DatabaseError, db.Error)
    for name in ("DataError", "OperationalError", "IntegrityError", "InternalError"):
        assert issubclass(getattr(db, name), db.DatabaseError)
    assert issubclass(db.ProgrammingError, db.DatabaseError)
    assert issubclass(db.NotSupportedError, db.DatabaseError)


def test_type_objects_compare_equal_to_their_column_types() -> None:
    assert db.NUMBER == ColumnType.LONG
    assert db.NUMBER == ColumnType.NEWDECIMAL
    assert db.NUMBER != ColumnType.VAR_STRING
    assert db.STRING == ColumnType.VAR_STRING
    assert db.BINARY == ColumnType.BLOB
    assert db.DATETIME == ColumnType.DATETIME
    assert db.DATETIME != ColumnType.LONG
    assert db.ROWID != ColumnType.LONG


def test_constructors() -> None:
    assert db.Date(2024, 2, 29) == datetime.date(2024, 2, 29)
    assert db.Time(12, 30, 1) == datetime.time(12, 30, 1)
    assert db.Timestamp(2024, 1, 2, 3, 4, 5) == datetime.datetime(2024, 1, 2, 3, 4, 5)
    assert db.Binary(bytearray(b"\x00\x01")) == b"\x00\x01"
    ticks = 1_700_000_000
    assert db.TimestampFromTicks(ticks) == datetime.datetime.fromtimestamp(ticks)
    assert db.DateFromTicks(ticks) == datetime.datetime.fromtimestamp(ticks).date()
    assert db.TimeFromTicks(ticks) == datetime.datetime.fromtimestamp(ticks).time()


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("db1", "db1", 3306),
        ("db1:3307", "db1", 3307),
        (" 10.0.0.5:33060 ", "10.0.0.5", 33060),
        ("[::1]:3310", "::1", 3310),
        ("[fe80::1]", "fe80::1", 3306),
        ("::1", "::1", 3306),
    ],
)
def test_server_addresses_parse(text: str, host: str, port: int) -> None:
    spec = ServerSpec.parse(text)
    assert (spec.host, spec.port) == (host, port)


def test_server_names_are_host_and_port() -> None:
    assert ServerSpec.parse("db1").name == "db1:3306"
    assert ServerSpec.parse("[::1]:3310").name == "[::1]:3310"


def test_a_server_dict_carries_per_server_options() -> None:
    spec = ServerSpec.parse({"host": "db2", "port": "3307", "password": "other"})
    assert (spec.host, spec.port, dict(spec.options)) == ("db2", 3307, {"password": "other"})


@pytest.mark.parametrize(
    "value",
    ["", "db1:", "db1:x", "db1:70000", {"port": 1}, {"host": "h", "cursorclass": 1}, 42],
)
def test_bad_server_addresses_are_interface_errors(value: object) -> None:
    with pytest.raises(errors.InterfaceError):
        ServerSpec.parse(value)  # type: ignore[arg-type]


def test_a_url_gives_every_setting() -> None:
    kwargs = parse_url(
        "mysql://app:p%40ss@db1:3306/shop?replica=db2:3307&replica=db3&level=read_latest"
        "&wait_timeout=0.25&on_timeout=next_replica&flavor=mariadb&charset=utf8mb4"
        "&connect_timeout=3&local_infile=true&autocommit=0&max_lag=2"
    )
    config = build_config(**kwargs)
    assert config.primary == ServerSpec("db1", 3306)
    assert config.replicas == (ServerSpec("db2", 3307), ServerSpec("db3", 3306))
    assert config.policy.level is Level.READ_LATEST
    assert config.policy.wait_timeout == 0.25
    assert config.policy.on_timeout is OnTimeout.NEXT_REPLICA
    assert config.policy.max_lag == 2.0
    assert config.flavor == "mariadb"
    assert config.autocommit is False
    assert dict(config.options) == {
        "user": "app",
        "password": "p@ss",
        "database": "shop",
        "charset": "utf8mb4",
        "connect_timeout": 3,
        "local_infile": True,
    }


def test_replicas_may_be_comma_separated_in_a_url() -> None:
    config = build_config(**parse_url("consistent://h1/db?replicas=h2:1,h3:2"))
    assert [r.name for r in config.replicas] == ["h2:1", "h3:2"]


def test_read_only_functions_from_a_url_or_a_keyword() -> None:
    url = "mysql://h1/db?read_only_functions=price,shop.fmt&read_only_functions=%60a%20b%60"
    config = build_config(**parse_url(url))
    assert config.read_only_functions == {"PRICE", "SHOP.FMT", "A B"}
    keyword = build_config(primary="h1", read_only_functions=["Price"])
    assert keyword.read_only_functions == {"PRICE"}
    assert build_config(primary="h1").read_only_functions == frozenset()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgres://u:secret@h/db", "unsupported URL scheme"),
        ("mysql://h/db?wait_timeout=soon", "wait_timeout must be a number"),
        ("mysql://h/db?autocommit=maybe", "autocommit must be a boolean"),
        ("mysql://u:secret@h/db?read_only_functions=a.b.c", "NAME or SCHEMA.NAME"),
    ],
)
def test_bad_urls_are_interface_errors(url: str, message: str) -> None:
    with pytest.raises(errors.InterfaceError, match=message) as info:
        build_config(**parse_url(url))
    assert "secret" not in str(info.value)


def test_pymysql_style_host_and_port_name_the_primary() -> None:
    config = build_config(host="db9", port=3399, user="u", db="x", passwd="pw")
    assert config.primary == ServerSpec("db9", 3399)
    assert dict(config.options) == {"user": "u", "database": "x", "password": "pw"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "needs primary"),
        ({"primary": "a", "host": "b"}, "either primary"),
        ({"primary": "a", "defer_connect": True}, "managed by consistent"),
        ({"primary": "a", "replicas": ["a:3306"]}, "listed twice"),
        ({"primary": "a", "flavor": "oracle"}, "flavor must be"),
        ({"primary": "a", "level": "strong"}, "unknown consistency level"),
        ({"primary": "a", "wait_timeout": 0}, "wait_timeout"),
    ],
)
def test_bad_configurations_are_interface_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(errors.InterfaceError, match=message):
        build_config(**kwargs)  # type: ignore[arg-type]


def test_replica_connections_give_up_sooner_than_the_primary() -> None:
    config = build_config(
        primary="p", replicas=["r1", {"host": "r2", "connect_timeout": 9}], connect_timeout=5
    )
    assert config.server_options(config.primary, replica=False)["connect_timeout"] == 5
    assert config.server_options(config.replicas[0], replica=True)["connect_timeout"] == 2.0
    assert config.server_options(config.replicas[1], replica=True)["connect_timeout"] == 9
    options = config.server_options(config.replicas[1], replica=True)
    assert (options["host"], options["port"]) == ("r2", 3306)


def test_an_unreachable_primary_is_an_operational_error_naming_it() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(db.OperationalError) as info:
        db.connect(primary=f"127.0.0.1:{port}", user="u", connect_timeout=2)
    assert info.value.errno == 2003
    assert f"cannot connect to the primary 127.0.0.1:{port}" in info.value.msg


def test_pymysql_cursor_classes_map_to_ours() -> None:
    assert cursor_class(pymysql.cursors.SSDictCursor) is db.SSDictCursor
    assert cursor_class(pymysql.cursors.Cursor) is db.Cursor
    assert cursor_class(db.SSCursor) is db.SSCursor
    with pytest.raises(errors.NotSupportedError):
        cursor_class(int)


# --- flavour statements (from consistent.flavors) -------------------------------------------


def test_wait_statements_are_built_from_parsed_states() -> None:
    mysql = MYSQL
    assert (
        mysql.wait_statement(GtidSet.parse(f"{A}:1-3,\n{A}:5"), 0.5)
        == f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{A}:1-3:5', 0.5)"
    )
    mariadb = MARIADB
    assert (
        mariadb.wait_statement(MariaPosition.parse("1-2-3,0-1-9"), 1)
        == "SELECT MASTER_GTID_WAIT('0-1-9,1-2-3', 1)"
    )


@pytest.mark.parametrize(
    ("flavor", "result", "outcome"),
    [
        ("mysql", 0, WaitOutcome.REACHED),
        ("mysql", Decimal(1), WaitOutcome.TIMED_OUT),
        ("mysql", None, WaitOutcome.ERROR),
        ("mysql", "x", WaitOutcome.ERROR),
        ("mariadb", b"0", WaitOutcome.REACHED),
        ("mariadb", -1, WaitOutcome.TIMED_OUT),
        ("mariadb", 1, WaitOutcome.ERROR),  # not a value MASTER_GTID_WAIT returns
    ],
)
def test_wait_results_map_to_the_policys_outcomes(
    flavor: str, result: object, outcome: WaitOutcome
) -> None:
    assert flavor_by_name(flavor).wait_outcome(result) is outcome


def test_tracking_statements_per_flavour_and_level() -> None:
    mysql = MYSQL
    assert mysql.tracking_probe() is None
    assert str(mysql.tracking_statement(mysql.tracker(Tracking.OWN))).endswith("OWN_GTID")
    assert str(mysql.tracking_statement(mysql.tracker(Tracking.ALL))).endswith("ALL_GTIDS")
    assert mysql.replica_tracking_statement() is not None
    mariadb = MARIADB
    assert mariadb.tracking_probe() is not None
    # MariaDB has only last_gtid: ALL tracks the same, and keeps what was already tracked.
    assert mariadb.tracker(Tracking.ALL) is Tracking.OWN
    assert mariadb.tracking_statement(Tracking.OWN, "autocommit,time_zone") == (
        "SET SESSION session_track_system_variables = 'autocommit,time_zone,last_gtid'"
    )
    assert mariadb.tracking_statement(Tracking.OWN, bytearray(b"last_gtid")) is None
    assert mariadb.replica_tracking_statement() is None
    primary = mariadb.executed_state_statement(ServerRole.PRIMARY)
    assert primary == "SELECT @@GLOBAL.gtid_binlog_pos"
    replica = mariadb.executed_state_statement(ServerRole.REPLICA)
    assert replica == "SELECT @@GLOBAL.gtid_slave_pos"
    assert mariadb.parse_executed(bytearray(b"0-1-5")) == MariaPosition.parse("0-1-5")
    assert mariadb.parse_executed(b"0-1-5") == MariaPosition.parse("0-1-5")
    assert mariadb.parse_executed(None) == MariaPosition()


@pytest.mark.parametrize(
    ("version", "flavor"),
    [
        ("5.5.5-10.11.6-MariaDB-0+deb12u1-log", "mariadb"),
        (b"11.4.2-MariaDB", "mariadb"),
        ("8.0.36", "mysql"),
        ("8.4.0-emulated", "mysql"),
        (None, "mysql"),
    ],
)
def test_the_flavour_is_detected_from_the_version_string(
    version: str | bytes | None, flavor: str
) -> None:
    assert server_flavor(None, version).name == flavor
