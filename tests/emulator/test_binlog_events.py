"""Gtid_log_event bytes and the mysqlbinlog printer (WL#7319, reference §5).

Golden bytes:
* ``EVENT_8026``: the first GTID event of ``binlog-invisible-columns.000001`` (MySQL 8.0.26),
  from ``blackbeam/rust_mysql_common test-data/binlogs/``, as transcribed in reference §5.
* ``MSB_TIMESTAMPS``: reference §5's DERIVED example of a relay-log event whose original and
  immediate timestamps differ (the manual's 1491299285661130 / 1491299285843771).
Printed lines follow real ``mysqlbinlog`` 8.0 output (e.g. ``shinhwagk/mysql-sync
mysqlbinlog.detail.md``) and the manual's "Replication Delay Timestamps" example.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import time
import zlib
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consistent.emulator.binlog import BinlogStatement, BinlogTransaction
from consistent.emulator.replication.events import (
    MAX_COMMIT_TIMESTAMP,
    GtidEvent,
    LogEventType,
    decode_gtid_event,
    encode_gtid_event,
    gtid_event_for,
    print_gtid_event,
)
from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.gtid import Gtid

EVENT_8026 = bytes.fromhex(
    "90d09c61"
    "21"
    "01000000"
    "4f000000"
    "eb000000"
    "0000"  # common header
    "01"  # commit flag
    "97c7af024c5011ecacd8681842034964"  # sid
    "0100000000000000"  # gno
    "02"  # lt_type
    "0000000000000000"  # last_committed
    "0100000000000000"  # sequence_number
    "37ad730d73d105"  # immediate_commit_timestamp (bit 55 clear)
    "fc4f01"  # transaction_length
    "9a380100"  # immediate_server_version
    "7d0d69b6"  # CRC32
)
MSB_TIMESTAMPS = bytes.fromhex("3bbf2f2c544c85caf52c2c544c05")
TIMESTAMPS_OFFSET = 19 + 1 + 16 + 8 + 1 + 8 + 8


def test_decode_golden_8026_event() -> None:
    event = decode_gtid_event(EVENT_8026)
    assert event.type_code is LogEventType.GTID_LOG_EVENT
    assert event.sid == "97c7af02-4c50-11ec-acd8-681842034964"
    assert event.gno == 1
    assert (event.timestamp, event.server_id, event.log_pos) == (0x619CD090, 1, 235)
    assert (event.last_committed, event.sequence_number) == (0, 1)
    assert event.immediate_commit_timestamp == 1637666960682295
    assert event.original_commit_timestamp == 1637666960682295
    moment = dt.datetime(2021, 11, 23, 11, 29, 20, 682295, tzinfo=dt.UTC)
    assert event.immediate_commit_timestamp == int(moment.timestamp()) * 10**6 + 682295
    assert event.transaction_length == 335
    assert event.immediate_server_version == event.original_server_version == 80026
    assert event.checksum == 0xB6690D7D
    assert event.has_commit_timestamps


def test_encode_reproduces_golden_bytes() -> None:
    event = GtidEvent(
        sid="97c7af02-4c50-11ec-acd8-681842034964",
        gno=1,
        timestamp=1637666960,
        server_id=1,
        log_pos=235,
        last_committed=0,
        sequence_number=1,
        immediate_commit_timestamp=1637666960682295,
        original_commit_timestamp=1637666960682295,
        transaction_length=335,
        immediate_server_version=80026,
        original_server_version=80026,
    )
    assert encode_gtid_event(event) == EVENT_8026


def test_differing_timestamps_set_bit_55_and_carry_the_original() -> None:
    base = decode_gtid_event(EVENT_8026)
    relayed = dataclasses.replace(
        base,
        immediate_commit_timestamp=1491299285843771,
        original_commit_timestamp=1491299285661130,
    )
    data = encode_gtid_event(relayed)
    assert data[TIMESTAMPS_OFFSET : TIMESTAMPS_OFFSET + 14] == MSB_TIMESTAMPS
    assert data[TIMESTAMPS_OFFSET + 6] == 0x85  # 0x05 | 0x80: bit 55 of the immediate value
    assert len(data) == len(EVENT_8026) + 7
    assert int.from_bytes(data[9:13], "little") == len(data)  # event_size
    decoded = decode_gtid_event(data)
    assert decoded.immediate_commit_timestamp == 1491299285843771
    assert decoded.original_commit_timestamp == 1491299285661130


def test_differing_server_versions_set_bit_31() -> None:
    base = decode_gtid_event(EVENT_8026)
    data = encode_gtid_event(dataclasses.replace(base, original_server_version=80017))
    version_at = len(data) - 4 - 8
    assert data[version_at : version_at + 4] == (80026 | 1 << 31).to_bytes(4, "little")
    decoded = decode_gtid_event(data)
    assert (decoded.immediate_server_version, decoded.original_server_version) == (80026, 80017)


def test_checksum_and_truncation_are_the_peers_errors() -> None:
    corrupt = bytearray(EVENT_8026)
    corrupt[30] ^= 0xFF
    with pytest.raises(RemoteProtocolError, match="checksum"):
        decode_gtid_event(bytes(corrupt))
    with pytest.raises(RemoteProtocolError):
        decode_gtid_event(EVENT_8026[:40])
    wrong_type = bytearray(EVENT_8026)
    wrong_type[4] = 2  # QUERY_EVENT
    with pytest.raises(RemoteProtocolError, match="not a GTID event"):
        decode_gtid_event(bytes(wrong_type))


def test_57_event_without_timestamps() -> None:
    """A 5.7 event ends after sequence_number: no timestamps, no transaction length."""
    body = EVENT_8026[19 : 19 + 42]
    size = 19 + len(body) + 4
    header = bytearray(EVENT_8026[:19])
    header[9:13] = size.to_bytes(4, "little")
    raw = bytes(header) + body
    raw += zlib.crc32(raw).to_bytes(4, "little")
    event = decode_gtid_event(raw)
    assert not event.has_commit_timestamps
    assert event.transaction_length is None
    assert event.immediate_server_version is None
    assert event.sequence_number == 1
    assert encode_gtid_event(event) == raw


def test_timestamps_must_fit_55_bits() -> None:
    event = dataclasses.replace(
        decode_gtid_event(EVENT_8026), immediate_commit_timestamp=MAX_COMMIT_TIMESTAMP + 1
    )
    with pytest.raises(LocalProtocolError):
        encode_gtid_event(event)


timestamps = st.integers(min_value=0, max_value=MAX_COMMIT_TIMESTAMP)


@given(
    gno=st.integers(min_value=1, max_value=2**63 - 2),
    immediate=timestamps,
    original=timestamps,
    length=st.integers(min_value=0, max_value=2**40),
    versions=st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1)),
    anonymous=st.booleans(),
)
def test_encode_decode_round_trip(
    *,
    gno: int,
    immediate: int,
    original: int,
    length: int,
    versions: tuple[int, int],
    anonymous: bool,
) -> None:
    event = GtidEvent(
        sid="00000000-0000-0000-0000-000000000000"
        if anonymous
        else "97c7af02-4c50-11ec-acd8-681842034964",
        gno=0 if anonymous else gno,
        anonymous=anonymous,
        immediate_commit_timestamp=immediate,
        original_commit_timestamp=original,
        transaction_length=length,
        immediate_server_version=versions[0],
        original_server_version=versions[1],
    )
    data = encode_gtid_event(event)
    decoded = decode_gtid_event(data)
    assert dataclasses.replace(decoded, checksum=None) == event
    flag_byte = data[TIMESTAMPS_OFFSET + 6]
    assert bool(flag_byte & 0x80) == (immediate != original)


def test_printer_matches_mysqlbinlog_lines() -> None:
    text = print_gtid_event(decode_gtid_event(EVENT_8026), tz=dt.UTC)
    assert text.splitlines() == [
        "#211123 11:29:20 server id 1  end_log_pos 235 CRC32 0xb6690d7d \tGTID"
        "\tlast_committed=0\tsequence_number=1\trbr_only=no"
        "\toriginal_committed_timestamp=1637666960682295"
        "\timmediate_commit_timestamp=1637666960682295\ttransaction_length=335",
        "# original_commit_timestamp=1637666960682295 (2021-11-23 11:29:20.682295 UTC)",
        "# immediate_commit_timestamp=1637666960682295 (2021-11-23 11:29:20.682295 UTC)",
        "/*!80001 SET @@session.original_commit_timestamp=1637666960682295*//*!*/;",
        "/*!80014 SET @@session.original_server_version=80026*//*!*/;",
        "/*!80014 SET @@session.immediate_server_version=80026*//*!*/;",
        "SET @@SESSION.GTID_NEXT= '97c7af02-4c50-11ec-acd8-681842034964:1'/*!*/;",
    ]


def test_printer_hour_is_space_padded_and_rbr_only_prints_isolation() -> None:
    event = dataclasses.replace(
        decode_gtid_event(EVENT_8026), timestamp=1714534357, commit_flags=0, checksum=None
    )
    lines = print_gtid_event(event, tz=dt.UTC).splitlines()
    assert lines[0].startswith("#240501  3:32:37 server id 1  end_log_pos 235 \tGTID")
    assert "\trbr_only=yes\t" in lines[0]
    assert lines[1] == "/*!50718 SET TRANSACTION ISOLATION LEVEL READ COMMITTED*//*!*/;"


@pytest.fixture
def lisbon_time() -> Iterator[None]:
    if not os.path.exists("/usr/share/zoneinfo/Europe/Lisbon"):
        pytest.skip("no tz database")
    previous = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Lisbon"
    time.tzset()
    try:
        yield
    finally:
        if previous is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = previous
        time.tzset()


@pytest.mark.usefixtures("lisbon_time")
def test_printer_uses_the_system_time_zone() -> None:
    """The manual's relay-log example, printed on a machine in Lisbon (WEST in April)."""
    relayed = dataclasses.replace(
        decode_gtid_event(EVENT_8026),
        immediate_commit_timestamp=1491299285843771,
        original_commit_timestamp=1491299285661130,
    )
    lines = print_gtid_event(relayed).splitlines()
    assert "# original_commit_timestamp=1491299285661130 (2017-04-04 10:48:05.661130 WEST)" in lines
    assert (
        "# immediate_commit_timestamp=1491299285843771 (2017-04-04 10:48:05.843771 WEST)" in lines
    )
    assert "/*!80001 SET @@session.original_commit_timestamp=1491299285661130*//*!*/;" in lines


def test_event_for_an_emulated_transaction() -> None:
    transaction = BinlogTransaction(
        gtid=Gtid("97c7af02-4c50-11ec-acd8-681842034964", 7),
        statements=(BinlogStatement("INSERT INTO t VALUES (1)", "d", 1_700_000_000.0),),
        original_commit_timestamp=1_700_000_000_000_000,
        immediate_commit_timestamp=1_700_000_001_250_000,
        original_server_version=80036,
        immediate_server_version=80036,
        server_id=3,
        sequence_number=5,
    )
    event = gtid_event_for(transaction, log_pos=1234)
    data = encode_gtid_event(event)
    decoded = decode_gtid_event(data)
    assert decoded.gtid_text == "97c7af02-4c50-11ec-acd8-681842034964:7"
    assert decoded.original_commit_timestamp == transaction.original_commit_timestamp
    assert decoded.immediate_commit_timestamp == transaction.immediate_commit_timestamp
    assert decoded.timestamp == 1_700_000_001
    assert decoded.server_id == 3
    assert decoded.sequence_number == 5
    assert decoded.transaction_length == transaction.size + len(data)
    anonymous = gtid_event_for(dataclasses.replace(transaction, gtid=None))
    assert anonymous.type_code is LogEventType.ANONYMOUS_GTID_LOG_EVENT
    assert "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'" in print_gtid_event(anonymous, tz=dt.UTC)


def test_format_binary_log_of_a_relay_hop() -> None:
    """A replica's own binary log: each relayed event shows both timestamps (F2-F4)."""
    from consistent.emulator.replication import Fixed, LagModel, TopologySpec, VirtualClock
    from consistent.emulator.replication.events import format_binary_log
    from consistent.emulator.replication.testing import execute, run_virtual, virtual_topology

    async def scenario(clock: VirtualClock) -> str:
        spec = TopologySpec.chain(2, lag=LagModel(network=Fixed(0.5), workers=0))
        async with await virtual_topology(spec, clock) as topo:
            await execute(topo.server("a"), "CREATE DATABASE d")
            await execute(topo.server("a"), "CREATE DATABASE e")
            await clock.sleep(1.0)
            binlog = topo.server("b").binlog
            assert binlog is not None
            return format_binary_log(binlog, tz=dt.UTC)

    text = run_virtual(scenario)
    lines = text.splitlines()
    assert lines[0] == "# binlog.000001"
    assert lines[1] == "# at 157"
    assert "# original_commit_timestamp=1700000000000000 (2023-11-14 22:13:20.000000 UTC)" in lines
    assert "# immediate_commit_timestamp=1700000000500000 (2023-11-14 22:13:20.500000 UTC)" in lines
    positions = [int(line[5:]) for line in lines if line.startswith("# at ")]
    assert len(positions) == 2
    assert positions[0] < positions[1]
    assert f"end_log_pos {positions[0] + 86} " in text  # 79 + 7 bytes of original timestamp
