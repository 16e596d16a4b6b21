"""MySQL and MariaDB flavours: detection, tracking, OK packets, waits, executed state, coverage."""

from __future__ import annotations

import math
import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consistent import policy
from consistent.errors import (
    InterfaceError,
    LocalProtocolError,
    MalformedGtidSet,
    NotSupportedError,
    RemoteProtocolError,
)
from consistent.flavors import (
    MARIADB,
    MYSQL,
    MYSQL_UNTAGGED,
    Flavor,
    MariaDBFlavor,
    MySQLFlavor,
    ServerRole,
    _quote_gtid_text,
    detect_flavor,
    flavor_by_name,
    server_flavor,
)
from consistent.gtid import GtidSet, MariaGtid, MariaPosition
from consistent.policy import states
from consistent.protocol import (
    Capability,
    Gtids,
    OkPacket,
    Schema,
    ServerStatus,
    StateChange,
    SystemVariable,
    TransactionState,
    parse_ok,
)
from consistent.vocabulary import Tracking, WaitOutcome

UUID_A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
UUID_B = "f27f6971-03e7-11eb-85c5-98af65a6dc4a"
TRACKING_CAPS = int(Capability.PROTOCOL_41 | Capability.SESSION_TRACK)

# --- detection ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        # Before 8.3 MySQL has no tagged GTIDs: its text is read with 8.0's grammar.
        ("8.0.36", MYSQL_UNTAGGED),
        ("5.7.44-log", MYSQL_UNTAGGED),
        ("8.4.0-commercial", MYSQL),
        ("8.3.0", MYSQL),
        ("8.0.34-26-Percona Server (GPL)", MYSQL_UNTAGGED),
        # MariaDB's handshake prefix that keeps pre-10 clients working.
        ("5.5.5-10.11.6-MariaDB-0+deb12u1", MARIADB),
        ("10.11.19-MariaDB-0+deb12u1-log", MARIADB),
        ("11.4.2-mariadb", MARIADB),
        (b"5.5.5-10.6.16-MariaDB", MARIADB),
        (b"8.0.36", MYSQL_UNTAGGED),
    ],
)
def test_detect_flavor_from_the_handshake_version(version: str | bytes, expected: Flavor) -> None:
    assert detect_flavor(version) is expected


def test_gtid_text_is_read_by_the_servers_version() -> None:
    """A tag is text only an 8.3+ server sends: an 8.0 server's OK packet cannot carry one, so
    reading ``uuid:a:1`` from it is the server's fault (RemoteProtocolError); 8.4's reads it."""
    tagged = f"{UUID_A}:a:1"
    block = Gtids(tagged)
    assert detect_flavor("8.4.3").gtids_from_session_state([block]) == GtidSet.parse(tagged)
    with pytest.raises(RemoteProtocolError):
        detect_flavor("8.0.36").gtids_from_session_state([block])
    with pytest.raises(MalformedGtidSet):
        detect_flavor("8.0.36").parse_state(f"{UUID_A}:a")
    untagged = f"{UUID_A}:1-3"
    for version in ("8.0.36", "8.4.3"):
        assert detect_flavor(version).parse_state(untagged) == GtidSet.parse(untagged)


def test_flavor_by_name_overrides_detection() -> None:
    assert flavor_by_name("mysql") is MYSQL
    assert flavor_by_name(" MariaDB ") is MARIADB
    assert isinstance(flavor_by_name("MYSQL"), MySQLFlavor)
    assert isinstance(flavor_by_name("mariadb"), MariaDBFlavor)
    with pytest.raises(InterfaceError, match="postgres"):
        flavor_by_name("postgres")


# --- turning tracking on ------------------------------------------------------------------------


def test_mysql_tracking_statements() -> None:
    assert MYSQL.tracking_probe() is None
    assert MYSQL.tracking_statement(Tracking.OWN) == "SET SESSION session_track_gtids = OWN_GTID"
    assert MYSQL.tracking_statement(Tracking.ALL) == "SET SESSION session_track_gtids = ALL_GTIDS"
    assert MYSQL.supported_modes == {Tracking.OWN, Tracking.ALL}


@pytest.mark.parametrize(
    ("current", "expected_list"),
    [
        ("", "last_gtid"),
        (b"", "last_gtid"),
        ("autocommit", "autocommit,last_gtid"),
        (
            "autocommit,character_set_client,character_set_connection,character_set_results,"
            "time_zone",
            "autocommit,character_set_client,character_set_connection,character_set_results,"
            "time_zone,last_gtid",
        ),
        (" autocommit , time_zone ,, autocommit", "autocommit,time_zone,last_gtid"),
    ],
)
def test_mariadb_adds_last_gtid_and_keeps_what_is_tracked(
    current: str | bytes, expected_list: str
) -> None:
    statement = MARIADB.tracking_statement(Tracking.OWN, current)
    assert statement == f"SET SESSION session_track_system_variables = '{expected_list}'"


@pytest.mark.parametrize("current", ["last_gtid", "autocommit,LAST_GTID", "*", "time_zone,*"])
def test_mariadb_sends_nothing_when_last_gtid_is_already_tracked(current: str) -> None:
    assert MARIADB.tracking_statement(Tracking.OWN, current) is None


def test_mariadb_tracking_needs_the_current_value_and_refuses_odd_names() -> None:
    assert MARIADB.tracking_probe() == "SELECT @@SESSION.session_track_system_variables"
    with pytest.raises(InterfaceError, match="tracking_probe"):
        MARIADB.tracking_statement(Tracking.OWN)
    with pytest.raises(InterfaceError):
        MARIADB.tracking_statement(Tracking.OWN, "x'; DROP TABLE t; --")
    with pytest.raises(NotSupportedError):
        MARIADB.tracking_statement(Tracking.ALL, "")
    assert MARIADB.supported_modes == {Tracking.OWN}


# --- the session's GTIDs from OK packets -----------------------------------------------------


def _ok(*blocks: object) -> OkPacket:
    status = ServerStatus.AUTOCOMMIT | ServerStatus.SESSION_STATE_CHANGED
    return OkPacket(status=status, session_state=tuple(blocks))  # type: ignore[arg-type]


def test_mysql_reads_the_gtids_block_and_ignores_the_rest() -> None:
    ok = _ok(
        SystemVariable("autocommit", "ON"),
        Schema("test"),
        StateChange(True),
        Gtids(f"{UUID_A}:1-3,\n{UUID_B}:7"),
        TransactionState("________"),
    )
    assert MYSQL.gtids_from_ok(ok) == GtidSet.from_intervals(
        {(UUID_A, None): [(1, 3)], (UUID_B, None): [(7, 7)]}
    )
    # A last_gtid variable means nothing to MySQL.
    assert MYSQL.gtids_from_ok(_ok(SystemVariable("last_gtid", "0-1-5"))) is None
    assert MYSQL.gtids_from_ok(_ok()) is None
    assert MYSQL.gtids_from_ok(_ok(Gtids(""))) is None


def test_mariadb_reads_last_gtid_and_ignores_the_rest() -> None:
    ok = _ok(
        SystemVariable("autocommit", "ON"),
        SystemVariable("last_gtid", "0-1-1001"),
        Gtids(f"{UUID_A}:1"),
    )
    assert MARIADB.gtids_from_ok(ok) == MariaPosition([MariaGtid(0, 1, 1001)])
    assert MARIADB.gtids_from_ok(_ok(SystemVariable("LAST_GTID", "2-9-4"))) == MariaPosition(
        [MariaGtid(2, 9, 4)]
    )
    # Empty until the session commits something (reference §1.7).
    assert MARIADB.gtids_from_ok(_ok(SystemVariable("last_gtid", ""))) is None
    assert MARIADB.gtids_from_ok(_ok(Schema("db"))) is None


@pytest.mark.parametrize(
    ("flavor", "block"),
    [
        (MYSQL, Gtids("not a set")),
        (MARIADB, SystemVariable("last_gtid", "0-1")),
        (MARIADB, SystemVariable("last_gtid", "zero-one-two")),
    ],
)
def test_impossible_gtid_text_from_the_server_is_a_remote_error(
    flavor: Flavor, block: object
) -> None:
    with pytest.raises(RemoteProtocolError):
        flavor.gtids_from_ok(_ok(block))


def test_mysql_gtids_from_a_captured_ok_packet() -> None:
    # Reference §1.6: vitessio/vitess go/mysql/conn_test.go TestOkPackets, captured from MySQL.
    payload = bytes.fromhex("0000000240000000 2a 03 28 00 26") + (f"{UUID_B}:2".encode())
    ok = parse_ok(payload, TRACKING_CAPS)
    assert MYSQL.gtids_from_ok(ok) == GtidSet.from_intervals({(UUID_B, None): [(2, 2)]})
    assert MARIADB.gtids_from_ok(ok) is None


def test_mariadb_last_gtid_from_wire_bytes() -> None:
    # Reference §1.7 wire form: 00 L 09 "last_gtid" 08 "0-1-1000" (MariaDB/server
    # mysql-test/main/session_tracker_last_gtid.result gives the values).
    entity = b"\x09last_gtid\x080-1-1000"
    block = b"\x00" + bytes([len(entity)]) + entity
    payload = bytes.fromhex("00000002400000") + b"\x00" + bytes([len(block)]) + block
    ok = parse_ok(payload, TRACKING_CAPS)
    assert MARIADB.gtids_from_ok(ok) == MariaPosition.parse("0-1-1000")


# --- wait statements -------------------------------------------------------------------------


def test_mysql_wait_statement_renders_the_parsed_set_on_one_line() -> None:
    state = MYSQL.parse_state(f"{UUID_B}:7,\n{UUID_A}:1-3:5")
    assert MYSQL.wait_statement(state, 2) == (
        f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{UUID_A}:1-3:5,{UUID_B}:7', 2)"
    )


def test_mariadb_wait_statement_renders_the_parsed_position() -> None:
    state = MARIADB.parse_state("1-2-5,0-1-10")
    assert MARIADB.wait_statement(state, 1.5) == "SELECT MASTER_GTID_WAIT('0-1-10,1-2-5', 1.5)"


@pytest.mark.parametrize(
    ("timeout", "mysql_text", "mariadb_text"),
    [
        (0, "0.000001", "0"),  # MySQL reads 0 as "forever"; MariaDB as "only check"
        (0.0, "0.000001", "0"),
        (0.25, "0.25", "0.25"),
        (3, "3", "3"),
        (Decimal("1.5"), "1.5", "1.5"),
        (1e-7, "0.000001", "0"),
    ],
)
def test_wait_timeouts_render_as_plain_decimals(
    timeout: float, mysql_text: str, mariadb_text: str
) -> None:
    assert MYSQL.wait_statement(GtidSet(), timeout).endswith(f"'', {mysql_text})")
    assert MARIADB.wait_statement(MariaPosition(), timeout).endswith(f"'', {mariadb_text})")


@pytest.mark.parametrize("timeout", [-1, -0.001, math.inf, math.nan, True, "2", None])
def test_wait_timeout_must_be_a_finite_non_negative_number(timeout: object) -> None:
    for flavor, state in ((MYSQL, GtidSet()), (MARIADB, MariaPosition())):
        with pytest.raises(InterfaceError):
            flavor.wait_statement(state, timeout)  # type: ignore[arg-type]


def test_a_flavour_refuses_the_other_flavours_state() -> None:
    with pytest.raises(InterfaceError, match="GtidSet"):
        MYSQL.wait_statement(MariaPosition.parse("0-1-1"), 1)
    with pytest.raises(InterfaceError, match="MariaPosition"):
        MARIADB.wait_statement(GtidSet(), 1)
    with pytest.raises(InterfaceError, match="MariaPosition"):
        MARIADB.format_state(GtidSet())


def test_quoting_refuses_anything_that_is_not_gtid_text() -> None:
    assert _quote_gtid_text(f"{UUID_A}:tag_1:1-2") == f"'{UUID_A}:tag_1:1-2'"
    for text in ("a'b", "a\\b", "a b", "0-1-1;", "x\n"):
        with pytest.raises(LocalProtocolError):
            _quote_gtid_text(text)


_WAIT = re.compile(r"SELECT (WAIT_FOR_EXECUTED_GTID_SET|MASTER_GTID_WAIT)\('([^']*)', [0-9.]+\)")

uuids = st.uuids().map(str)
intervals = st.lists(
    st.tuples(st.integers(1, 10**6), st.integers(0, 1000)).map(lambda p: (p[0], p[0] + p[1])),
    min_size=1,
    max_size=4,
)
tags = st.none() | st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
gtid_sets = st.dictionaries(st.tuples(uuids, tags), intervals, max_size=4).map(
    GtidSet.from_intervals
)
maria_gtids = st.builds(
    MariaGtid, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1)
)
positions = st.lists(maria_gtids, max_size=4, unique_by=lambda g: g.domain).map(MariaPosition)
timeouts = st.floats(0, 10**6, allow_nan=False)


@given(gtid_sets, timeouts)
def test_mysql_wait_statement_round_trips_the_set(state: GtidSet, timeout: float) -> None:
    match = _WAIT.fullmatch(MYSQL.wait_statement(state, timeout))
    assert match is not None
    assert match.group(1) == "WAIT_FOR_EXECUTED_GTID_SET"
    assert GtidSet.parse(match.group(2)) == state


@given(positions, timeouts)
def test_mariadb_wait_statement_round_trips_the_position(
    state: MariaPosition, timeout: float
) -> None:
    match = _WAIT.fullmatch(MARIADB.wait_statement(state, timeout))
    assert match is not None
    assert match.group(1) == "MASTER_GTID_WAIT"
    assert MariaPosition.parse(match.group(2)) == state


# --- wait results --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flavor", "value", "expected"),
    [
        (MYSQL, 0, WaitOutcome.REACHED),
        (MYSQL, 1, WaitOutcome.TIMED_OUT),
        (MYSQL, "1", WaitOutcome.TIMED_OUT),
        (MYSQL, b"0", WaitOutcome.REACHED),
        (MYSQL, None, WaitOutcome.ERROR),
        (MARIADB, 0, WaitOutcome.REACHED),
        (MARIADB, -1, WaitOutcome.TIMED_OUT),
        (MARIADB, b"-1", WaitOutcome.TIMED_OUT),
        (MARIADB, Decimal("0"), WaitOutcome.REACHED),
        (MARIADB, -1.0, WaitOutcome.TIMED_OUT),
        (MARIADB, None, WaitOutcome.ERROR),
    ],
)
def test_wait_results(flavor: Flavor, value: object, expected: WaitOutcome) -> None:
    assert flavor.wait_outcome(value) is expected


@pytest.mark.parametrize(
    ("flavor", "value"),
    [
        (MYSQL, -1),  # MariaDB's timeout value is not MySQL's
        (MARIADB, 1),  # and the other way round
        (MYSQL, 2),
        (MYSQL, True),
        (MYSQL, "yes"),
        (MARIADB, 0.5),
        (MARIADB, math.nan),
        (MARIADB, Decimal("NaN")),
        (MARIADB, b""),
    ],
)
def test_impossible_wait_results_are_errors(flavor: Flavor, value: object) -> None:
    assert flavor.wait_outcome(value) is WaitOutcome.ERROR


# --- executed state ----------------------------------------------------------------------------


def test_executed_state_statements() -> None:
    assert MYSQL.executed_state_statement(ServerRole.PRIMARY) == "SELECT @@GLOBAL.gtid_executed"
    assert MYSQL.executed_state_statement(ServerRole.REPLICA) == "SELECT @@GLOBAL.gtid_executed"
    assert MARIADB.executed_state_statement(ServerRole.PRIMARY) == "SELECT @@GLOBAL.gtid_binlog_pos"
    assert MARIADB.executed_state_statement(ServerRole.REPLICA) == "SELECT @@GLOBAL.gtid_slave_pos"


def test_parse_executed() -> None:
    # mysqld prints gtid_executed with ",\n" between UUIDs (reference §3.2).
    text = f"{UUID_A}:1-5,\n{UUID_B}:1-3"
    expected = GtidSet.from_intervals({(UUID_A, None): [(1, 5)], (UUID_B, None): [(1, 3)]})
    assert MYSQL.parse_executed(text) == expected
    assert MYSQL.parse_executed(text.encode()) == expected
    assert MYSQL.parse_executed("") == GtidSet()
    assert MYSQL.parse_executed(None) == GtidSet()
    assert MARIADB.parse_executed(b"0-1-5,1-2-3") == MariaPosition(
        [MariaGtid(0, 1, 5), MariaGtid(1, 2, 3)]
    )
    assert MARIADB.parse_executed("") == MariaPosition()
    for flavor in (MYSQL, MARIADB):
        with pytest.raises(RemoteProtocolError):
            flavor.parse_executed("garbage")


def test_parse_state_raises_malformed_for_user_text() -> None:
    with pytest.raises(MalformedGtidSet):
        MYSQL.parse_state("nope")
    with pytest.raises(MalformedGtidSet):
        MARIADB.parse_state("0-1-1,0-2-2")  # one GTID per domain


# --- the flavour of a server ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "version", "expected"),
    [
        (None, None, MYSQL),
        ("mysql", None, MYSQL),
        (None, "8.0.36", MYSQL_UNTAGGED),
        ("mysql", "8.0.36", MYSQL_UNTAGGED),
        ("mysql", "8.4.0", MYSQL),
        ("mysql", "10.11.6-MariaDB", MYSQL),  # named: the name wins
        (None, b"10.11.6-MariaDB", MARIADB),
        ("mariadb", "8.0.36", MARIADB),
    ],
)
def test_server_flavor_from_the_name_and_the_version(
    name: policy.FlavorName | None, version: str | bytes | None, expected: Flavor
) -> None:
    assert server_flavor(name, version) is expected


def test_the_tracker_per_level() -> None:
    assert MYSQL.tracker(Tracking.ALL) is Tracking.ALL
    assert MYSQL.tracker(Tracking.OWN) is Tracking.OWN
    assert MARIADB.tracker(Tracking.ALL) is Tracking.OWN
    assert MYSQL.replica_tracking_statement() == "SET SESSION session_track_gtids = ALL_GTIDS"
    assert MARIADB.replica_tracking_statement() is None


# --- coverage ----------------------------------------------------------------------------------


def test_mysql_covers_is_set_inclusion() -> None:
    executed = MYSQL.parse_state(f"{UUID_A}:1-10")
    assert states.covers(executed, MYSQL.parse_state(f"{UUID_A}:3-4"))
    assert states.covers(executed, MYSQL.empty_state())
    assert not states.covers(executed, MYSQL.parse_state(f"{UUID_A}:11"))
    assert not states.covers(executed, MYSQL.parse_state(f"{UUID_B}:1"))
    # A gap is not covered even when higher GNOs are.
    gappy = MYSQL.parse_state(f"{UUID_A}:1-4:6-10")
    assert not states.covers(gappy, MYSQL.parse_state(f"{UUID_A}:5"))
    assert states.missing(MYSQL.parse_state(f"{UUID_A}:4-6"), gappy) == MYSQL.parse_state(
        f"{UUID_A}:5"
    )


def test_mariadb_covers_is_seq_no_per_domain() -> None:
    executed = MARIADB.parse_state("0-1-100,1-2-5")
    assert states.covers(executed, MARIADB.parse_state("0-1-100"))
    assert states.covers(executed, MARIADB.parse_state("0-7-50"))  # server id does not matter
    assert states.covers(executed, MARIADB.empty_state())
    assert not states.covers(executed, MARIADB.parse_state("0-1-101"))
    assert not states.covers(executed, MARIADB.parse_state("2-1-1"))
    assert states.missing(
        MARIADB.parse_state("0-1-101,1-2-5,2-3-1"), executed
    ) == MARIADB.parse_state("0-1-101,2-3-1")


@given(positions, positions)
def test_mariadb_outstanding_is_empty_exactly_when_covered(
    executed: MariaPosition, required: MariaPosition
) -> None:
    assert states.covers(executed, required) == (not states.missing(required, executed))
    merged = states.merge(executed, required)
    assert states.covers(merged, required)
    assert states.covers(merged, executed)
    assert states.covers(states.merge(executed, states.missing(required, executed)), required)


@given(gtid_sets, gtid_sets)
def test_mysql_outstanding_is_empty_exactly_when_covered(
    executed: GtidSet, required: GtidSet
) -> None:
    assert states.covers(executed, required) == (not states.missing(required, executed))
    merged = states.merge(executed, required)
    assert states.covers(merged, required)
    assert states.covers(merged, executed)


@given(gtid_sets)
def test_mysql_format_parse_round_trip(state: GtidSet) -> None:
    text = MYSQL.format_state(state)
    assert "\n" not in text
    assert MYSQL.parse_state(text) == state


@given(positions)
def test_mariadb_format_parse_round_trip(state: MariaPosition) -> None:
    assert MARIADB.parse_state(MARIADB.format_state(state)) == state


def test_empty_states() -> None:
    assert MYSQL.empty_state() == GtidSet()
    assert not MYSQL.empty_state()
    assert MARIADB.empty_state() == MariaPosition()
    assert not MARIADB.empty_state()
    assert MYSQL.format_state(MYSQL.empty_state()) == ""
    assert MARIADB.format_state(MARIADB.empty_state()) == ""


@pytest.mark.parametrize(
    ("flavor", "value", "expected"),
    [
        (MYSQL, 0, policy.WaitOutcome.REACHED),
        (MYSQL, b"1", policy.WaitOutcome.TIMED_OUT),
        (MARIADB, -1, policy.WaitOutcome.TIMED_OUT),
        # NULL tells nothing about the replica; an impossible value neither.
        (MARIADB, None, policy.WaitOutcome.ERROR),
        (MYSQL, -1, policy.WaitOutcome.ERROR),
        (MARIADB, "yes", policy.WaitOutcome.ERROR),
    ],
)
def test_the_policy_outcome_of_a_wait_result(
    flavor: Flavor, value: object, expected: policy.WaitOutcome
) -> None:
    assert policy.wait_outcome(flavor, value) is expected
