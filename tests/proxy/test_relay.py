"""The response relay, against an independent encoder.

The oracle: a logical response (OKs, ERRs, result sets) is encoded the way mysqld encodes it for
a client with given capabilities (reference §1.1, §1.5: EOF packets without DEPRECATE_EOF, a
0xFE-headed OK terminator with it; session state only under SESSION_TRACK), using the codec's
builders (``consistent.protocol``), not the relay.  Relaying the backend's encoding for the
client's capabilities must give exactly the client's encoding, sequence ids included, however
the bytes are chunked.  One documented deviation: the EOF the relay injects after column
definitions carries the status hint it was given (mysqld's middle EOF carries the status at that
moment, which the proxy cannot know); the oracle encodes that EOF with the same hint.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consistent.errnos import ER
from consistent.errors import RemoteProtocolError
from consistent.protocol import (
    Capability,
    ColumnDefinition41,
    EofPacket,
    ErrPacket,
    OkPacket,
    ServerStatus,
    SystemVariable,
    build_column_count,
    build_column_definition41,
    build_eof,
    build_err,
    build_ok,
    build_text_row,
    frame_packets,
    parse_ok,
)
from proxy.relay import ResponseKind, ResponseRelay, parse_response
from proxy.stream import frame, renumber

BASE = Capability.PROTOCOL_41 | Capability.SECURE_CONNECTION | Capability.TRANSACTIONS
DEP = Capability.DEPRECATE_EOF
TRACK = Capability.SESSION_TRACK
BACKEND = BASE | DEP | TRACK
AUTOCOMMIT = ServerStatus.AUTOCOMMIT
MORE = ServerStatus.MORE_RESULTS_EXISTS
CHANGED = ServerStatus.SESSION_STATE_CHANGED
HINT = int(AUTOCOMMIT)
STATE = (SystemVariable("last_gtid", "0-1-42"),)

CLIENT_CAPS = [BASE, BASE | DEP, BASE | TRACK, BASE | DEP | TRACK]
BACKEND_CAPS = [BASE | TRACK, BASE | DEP | TRACK]


@dataclass(frozen=True)
class Ok:
    affected: int = 0
    state: tuple[SystemVariable, ...] = ()
    warnings: int = 0


@dataclass(frozen=True)
class Err:
    errno: int = 1146
    message: str = "Table 't' doesn't exist"


@dataclass(frozen=True)
class ResultSet:
    columns: tuple[str, ...] = ("a",)
    rows: tuple[tuple[str | None, ...], ...] = ()
    state: tuple[SystemVariable, ...] = ()
    warnings: int = 0


Item = Ok | Err | ResultSet


@dataclass
class Encoder:
    """mysqld's encoding of a response for ``caps`` (the oracle)."""

    caps: int
    payloads: list[bytes] = field(default_factory=list)

    def ok(self, ok: Ok, status: int, header: int = 0x00) -> bytes:
        tracked = bool(self.caps & TRACK) and bool(ok.state)
        flags = status | (CHANGED if tracked else 0)
        packet = OkPacket(
            affected_rows=ok.affected,
            status=ServerStatus(flags),
            warnings=ok.warnings,
            session_state=ok.state if tracked else (),
            header=header,
        )
        return build_ok(packet, self.caps)

    def add(self, item: Item, more: bool) -> None:
        status = int(AUTOCOMMIT | (MORE if more else 0))
        if isinstance(item, Ok):
            self.payloads.append(self.ok(item, status))
        elif isinstance(item, Err):
            self.payloads.append(build_err(ErrPacket(item.errno, "42S02", item.message), self.caps))
        else:
            deprecate = bool(self.caps & DEP)
            self.payloads.append(build_column_count(len(item.columns), self.caps))
            for name in item.columns:
                self.payloads.append(
                    build_column_definition41(ColumnDefinition41(name=name), self.caps)
                )
            if not deprecate:
                self.payloads.append(build_eof(EofPacket(0, ServerStatus(HINT)), self.caps))
            for row in item.rows:
                self.payloads.append(build_text_row(row))
            if deprecate:
                terminator = Ok(state=item.state, warnings=item.warnings)
                self.payloads.append(self.ok(terminator, status, header=0xFE))
            else:
                eof = EofPacket(item.warnings, ServerStatus(status))
                self.payloads.append(build_eof(eof, self.caps))

    def wire(self, first_seq: int = 1) -> bytes:
        out = []
        seq = first_seq
        for payload in self.payloads:
            data, seq = frame_packets(payload, seq)
            out.append(data)
        return b"".join(out)


def encode(items: list[Item], caps: int) -> bytes:
    enc = Encoder(caps)
    for i, item in enumerate(items):
        enc.add(item, more=i < len(items) - 1 and not isinstance(item, Err))
    return enc.wire()


def relay_all(
    data: bytes, backend: int, client: int, cuts: list[int], kind: ResponseKind = ResponseKind.QUERY
) -> tuple[bytes, ResponseRelay, int]:
    out = bytearray()
    relay = ResponseRelay(kind, backend, client, out.extend, status_hint=HINT)
    consumed = 0
    start = 0
    for cut in [*sorted(set(cuts)), len(data)]:
        if cut <= start:
            continue
        chunk = data[start:cut]
        used = relay.feed(chunk)
        consumed += used
        start = cut
        if relay.done:
            break
    return bytes(out), relay, consumed


# ----------------------------------------------------------------- strategies

names = st.text(alphabet="abcxyz", min_size=1, max_size=4)
values = st.one_of(st.none(), st.text(alphabet="abc\xfe\xff01", max_size=8))
result_sets = st.builds(
    ResultSet,
    columns=st.lists(names, min_size=1, max_size=3).map(tuple),
    rows=st.integers(0, 4),
    state=st.sampled_from([(), STATE]),
    warnings=st.integers(0, 3),
).flatmap(
    lambda rs: st.lists(
        st.tuples(*[values] * len(rs.columns)), min_size=rs.rows, max_size=rs.rows
    ).map(lambda rows: ResultSet(rs.columns, tuple(rows), rs.state, rs.warnings))
)
oks = st.builds(Ok, affected=st.integers(0, 300), state=st.sampled_from([(), STATE]))
responses = st.lists(st.one_of(oks, result_sets), min_size=1, max_size=3).flatmap(
    lambda items: st.sampled_from([items, [*items[:-1], Err()]])
)


@settings(max_examples=300, deadline=None)
@given(
    items=responses,
    backend=st.sampled_from(BACKEND_CAPS),
    client=st.sampled_from(CLIENT_CAPS),
    cuts=st.lists(st.integers(0, 400), max_size=6),
    trailing=st.binary(max_size=9),
)
def test_relay_matches_the_clients_encoding(
    items: list[Item], backend: int, client: int, cuts: list[int], trailing: bytes
) -> None:
    data = encode(items, backend)
    if not backend & DEP:
        # An EOF terminator cannot carry session state: there is none to pass on.
        items = [
            ResultSet(i.columns, i.rows, (), i.warnings) if isinstance(i, ResultSet) else i
            for i in items
        ]
    expected = encode(items, client)
    out, relay, consumed = relay_all(data + trailing, backend, client, cuts)
    assert relay.done
    assert consumed == len(data), "the relay must stop exactly at the response's end"
    assert out == expected
    ends_in_error = isinstance(items[-1], Err)
    assert (relay.error is not None) == ends_in_error


@settings(max_examples=100, deadline=None)
@given(items=responses, cuts=st.lists(st.integers(0, 400), max_size=6))
def test_state_oks_are_reported_whatever_the_client(items: list[Item], cuts: list[int]) -> None:
    data = encode(items, BACKEND)
    _out, relay, _ = relay_all(data, BACKEND, BASE, cuts)
    reported = [parse_ok(p, BACKEND).session_state for p in relay.state_oks or []]
    with_state = [i for i in items if not isinstance(i, Err) and i.state]
    assert reported == [STATE] * len(with_state)


single_responses = st.one_of(oks, result_sets, st.just(Err()))


@settings(max_examples=300, deadline=None)
@given(
    item=single_responses,
    backend=st.sampled_from(BACKEND_CAPS),
    client=st.sampled_from(CLIENT_CAPS),
    kind=st.sampled_from([ResponseKind.QUERY, ResponseKind.EXECUTE]),
    hint=st.sampled_from([HINT, int(AUTOCOMMIT | ServerStatus.IN_TRANS)]),
)
def test_a_whole_response_in_one_chunk_is_relayed_as_byte_by_byte(
    item: Item, backend: int, client: int, kind: ResponseKind, hint: int
) -> None:
    """One response in one chunk may take the fast path; fed a byte at a time it cannot.
    Both must give the same bytes and leave the relay in the same state."""
    data = encode([item], backend)
    whole = bytearray()
    fast = ResponseRelay(kind, backend, client, whole.extend, status_hint=hint)
    assert fast.feed(data) == len(data)
    slow_out = bytearray()
    slow = ResponseRelay(kind, backend, client, slow_out.extend, status_hint=hint)
    for i in range(len(data)):
        slow.feed(data[i : i + 1])
    assert fast.done
    assert slow.done
    assert whole == slow_out
    assert (fast.status, fast.last_seq, fast.error, fast.state_oks, fast.wrote) == (
        slow.status,
        slow.last_seq,
        slow.error,
        slow.state_oks,
        slow.wrote,
    )


@pytest.mark.parametrize("client", CLIENT_CAPS)
def test_the_commonest_responses_take_the_fast_path(client: int) -> None:
    """A point select (one row) and an OK: one walk, one write, whatever the client."""
    for item in (ResultSet(rows=(("x",),)), Ok(affected=1)):
        writes: list[bytes | bytearray | memoryview] = []
        relay = ResponseRelay(ResponseKind.EXECUTE, BACKEND, client, writes.append)
        assert relay._whole(encode([item], BACKEND))
        assert b"".join(writes) == encode([item], client)
        assert len(writes) == 1


def test_bytes_left_from_an_earlier_chunk_are_not_skipped() -> None:
    data = encode([ResultSet(rows=(("x",),))], BACKEND)
    out = bytearray()
    relay = ResponseRelay(ResponseKind.QUERY, BACKEND, BASE, out.extend, status_hint=HINT)
    relay.feed(data[:2])  # less than a header: kept until the rest arrives
    relay.feed(data[2:])
    assert relay.done
    assert bytes(out) == encode([ResultSet(rows=(("x",),))], BASE)


def test_identity_relay_passes_the_very_same_bytes_object() -> None:
    data = encode([ResultSet(("a", "b"), (("1", None), ("2", "x")))], BACKEND)
    seen: list[object] = []
    relay = ResponseRelay(ResponseKind.QUERY, BACKEND, BACKEND, seen.append)
    assert relay.feed(data) == len(data)
    assert seen == [data]
    assert seen[0] is data


def test_sequence_ids_after_an_injected_eof_and_a_failure_seq() -> None:
    data = encode([ResultSet(("a",), (("1",), ("2",)))], BACKEND)
    out, relay, _ = relay_all(data, BACKEND, BASE, [])
    # count(1) coldef(2) EOF(3, injected) row(4) row(5) EOF(6)
    assert relay.last_seq == 6
    assert relay.fail_seq(0) == 7
    assert out[3] == 1
    assert out == encode([ResultSet(("a",), (("1",), ("2",)))], BASE)


def test_strips_session_state_for_a_client_without_session_track() -> None:
    data = encode([Ok(affected=1, state=STATE)], BACKEND)
    out, relay, _ = relay_all(data, BACKEND, BASE | DEP, [])
    ok = parse_ok(out[4:], BASE | DEP)
    assert ok.affected_rows == 1
    assert not ok.status & CHANGED
    assert ok.session_state == ()
    assert relay.state_oks is not None
    assert len(relay.state_oks) == 1


def test_a_broken_packet_is_reported_and_mid_packet_detected() -> None:
    data = encode([ResultSet(("a",), (("x" * 50,),))], BACKEND)
    relay = ResponseRelay(ResponseKind.QUERY, BACKEND, BACKEND, lambda _d: None)
    cut = data.index(b"x" * 50) + 10
    relay.feed(data[:cut])
    assert relay.mid_packet
    assert not relay.done
    with pytest.raises(RemoteProtocolError):
        ResponseRelay(ResponseKind.QUERY, BACKEND, BACKEND, lambda _d: None).feed(
            frame_packets(b"\xfe\x00\x00", 1)[0]
        )


# ----------------------------------------------------------------- prepared statements


def prepare_response(caps: int, stmt_id: int, params: int, columns: int) -> bytes:
    payloads = [
        b"\x00"
        + stmt_id.to_bytes(4, "little")
        + columns.to_bytes(2, "little")
        + params.to_bytes(2, "little")
        + b"\x00\x00\x00"
    ]
    for block, count in (("?", params), ("c", columns)):
        for i in range(count):
            payloads.append(build_column_definition41(ColumnDefinition41(f"{block}{i}"), caps))
        if count and not caps & DEP:
            payloads.append(build_eof(EofPacket(0, ServerStatus(HINT)), caps))
    enc = Encoder(caps, payloads)
    return enc.wire()


@settings(max_examples=100, deadline=None)
@given(
    params=st.integers(0, 3),
    columns=st.integers(0, 3),
    backend=st.sampled_from(BACKEND_CAPS),
    client=st.sampled_from(CLIENT_CAPS),
    cuts=st.lists(st.integers(0, 300), max_size=4),
)
def test_prepare_rewrites_the_id_and_translates_eofs(
    params: int, columns: int, backend: int, client: int, cuts: list[int]
) -> None:
    data = prepare_response(backend, 0x01020304, params, columns)
    out = bytearray()
    relay = ResponseRelay(ResponseKind.PREPARE, backend, client, out.extend, client_stmt_id=7)
    start = 0
    for cut in [*sorted(set(cuts)), len(data) + 3]:
        if cut <= start:
            continue
        relay.feed((data + b"\x05\x00\x00")[start:cut])
        start = cut
        if relay.done:
            break
    assert relay.done
    assert relay.prepared == (0x01020304, columns, params)
    assert bytes(out) == prepare_response(client, 7, params, columns)


# ----------------------------------------------------------------- LOCAL INFILE, big rows


def test_refused_local_infile_becomes_an_error_with_the_right_sequence_id() -> None:
    request = frame_packets(b"\xfbdata.csv", 1)[0]
    answer = frame_packets(build_ok(OkPacket(affected_rows=0, status=AUTOCOMMIT), BACKEND), 3)[0]
    out = bytearray()
    asked: list[int] = []
    relay = ResponseRelay(ResponseKind.QUERY, BACKEND, BASE, out.extend)
    relay.on_infile = lambda r: asked.append(r.infile_seq)
    relay.feed(request)
    assert asked == [1]
    assert out == b""
    relay.feed(answer)
    assert relay.done
    assert out[3] == 1  # the ERR answers the client's command (seq 0)
    assert int.from_bytes(out[5:7], "little") == ER.NOT_ALLOWED_COMMAND
    assert relay.error is not None


def test_allowed_local_infile_passes_through() -> None:
    request = frame_packets(b"\xfbdata.csv", 1)[0]
    answer = frame_packets(build_ok(OkPacket(affected_rows=2, status=AUTOCOMMIT), BASE), 4)[0]
    out = bytearray()
    relay = ResponseRelay(ResponseKind.QUERY, BACKEND, BASE, out.extend, local_infile=True)
    relay.feed(request)
    assert relay.infile == b"data.csv"
    assert not relay.done
    relay.feed(answer)
    assert relay.done
    assert bytes(out) == request + answer


def test_a_row_of_16_mib_and_more_is_one_row() -> None:
    # A text row whose continuation packet starts with 0xFE: only the relay's continuation
    # tracking keeps it from being taken for a terminator.
    big = b"\xfe" + (0xFFFFFF + 5).to_bytes(8, "little") + b"\xfe" * (0xFFFFFF + 5)
    enc = Encoder(BACKEND)
    enc.payloads += [
        build_column_count(1, BACKEND),
        build_column_definition41(ColumnDefinition41("blob"), BACKEND),
    ]
    enc.payloads.append(big)
    enc.payloads.append(enc.ok(Ok(), int(AUTOCOMMIT), header=0xFE))
    data = enc.wire()
    out, relay, consumed = relay_all(data, BACKEND, BACKEND, [100, 0xFFFFFF + 3])
    assert relay.done
    assert consumed == len(data)
    assert out == data


# ----------------------------------------------------------------- internal queries


def test_parse_response_reads_a_scalar_and_errors() -> None:
    rows = encode([ResultSet(("x",), (("0",),))], BACKEND)
    assert parse_response(rows, BACKEND).scalar() == b"0"
    assert parse_response(encode([ResultSet(("x",), ((None,),))], BASE), BASE).scalar() is None
    err = parse_response(encode([Err()], BACKEND), BACKEND)
    assert err.error is not None
    assert err.error.errno == 1146


@settings(max_examples=150, deadline=None)
@given(
    sequence=st.lists(
        st.tuples(responses, st.lists(st.integers(0, 400), max_size=4)), min_size=2, max_size=4
    ),
    backend=st.sampled_from(BACKEND_CAPS),
    client=st.sampled_from(CLIENT_CAPS),
)
def test_a_reused_relay_relays_like_a_new_one(
    sequence: list[tuple[list[Item], list[int]]], backend: int, client: int
) -> None:
    """One relay reused for response after response (each whole or cut into chunks, so that
    both the one-pass path and the general loop leave their state behind) gives every byte
    and every reported fact that a new relay per response gives."""
    reused_out = bytearray()
    reused = ResponseRelay(ResponseKind.QUERY, backend, client, reused_out.extend, status_hint=HINT)
    for index, (items, cuts) in enumerate(sequence):
        data = encode(items, backend)
        if index:
            reused.reuse(ResponseKind.QUERY, HINT)
        fresh_out, fresh, _ = relay_all(data, backend, client, cuts)
        reused_out.clear()
        start = 0
        for cut in [*sorted(set(cuts)), len(data)]:
            if cut <= start:
                continue
            reused.feed(data[start:cut])
            start = cut
        assert reused.done
        assert bytes(reused_out) == fresh_out
        assert (reused.status, reused.last_seq, reused.error, reused.state_oks) == (
            fresh.status,
            fresh.last_seq,
            fresh.error,
            fresh.state_oks,
        )


def test_a_relay_is_reused_only_once_complete() -> None:
    relay = ResponseRelay(ResponseKind.QUERY, BACKEND, BASE, bytearray().extend)
    with pytest.raises(RuntimeError):
        relay.reuse(ResponseKind.QUERY, HINT)


# --- an answer numbered after a command that arrived in several packets --------------------


def _frames(wire: bytes) -> list[tuple[int, bytes]]:
    out = []
    while wire:
        length = int.from_bytes(wire[:3], "little")
        out.append((wire[3], wire[4 : 4 + length]))
        wire = wire[4 + length :]
    return out


@pytest.mark.parametrize("split", [1, 3, 5, 100])
def test_an_expected_first_sequence_id_renumbers_the_response(split: int) -> None:
    # A server that refused a multi-packet command after its first piece numbers its ERR 2;
    # the client, having sent four packets, expects 4.
    err = build_err(ErrPacket(1153, "08S01", "Got a packet bigger"), BACKEND)
    wire = len(err).to_bytes(3, "little") + b"\x02" + err
    out: list[bytes] = []
    relay = ResponseRelay(ResponseKind.QUERY, BACKEND, BACKEND, out.append)
    relay.expect(4)
    for at in range(0, len(wire), split):
        relay.feed(wire[at : at + split])
    assert relay.done
    assert relay.error == err
    assert _frames(b"".join(out)) == [(4, err)]
    assert relay.next_seq == 5


def test_a_shift_renumbers_what_is_still_to_come() -> None:
    ok = build_ok(OkPacket(status=AUTOCOMMIT), BACKEND)
    out: list[bytes] = []
    relay = ResponseRelay(ResponseKind.QUERY, BACKEND, BACKEND, out.append)
    relay.shift(3)
    relay.feed(len(ok).to_bytes(3, "little") + b"\x01" + ok)
    assert _frames(b"".join(out)) == [(4, ok)]


def test_renumber_counts_whole_packets_only() -> None:
    wire = b"\x01\x00\x00\x07A" + b"\x02\x00\x00\x09BC" + b"\x05\x00\x00"
    renumbered, used = renumber(wire, 3)
    assert renumbered == b"\x01\x00\x00\x03A" + b"\x02\x00\x00\x04BC"
    assert used == 11


@pytest.mark.parametrize(
    ("affected", "insert_id"), [(1, 7), (1, 0), (300, 70_000), (256, 1 << 40), (0, 250)]
)
@pytest.mark.parametrize("cut", [False, True])
def test_the_ok_packets_last_insert_id_is_kept(affected: int, insert_id: int, cut: bool) -> None:
    ok = OkPacket(affected_rows=affected, last_insert_id=insert_id, status=AUTOCOMMIT)
    data = frame(build_ok(ok, BACKEND), 1)
    # Whole (the one-pass path) or cut in two (the general path).
    _out, relay, _ = relay_all(data, BACKEND, BACKEND, [5] if cut else [])
    assert relay.done
    assert relay.insert_id == insert_id


def test_the_last_non_zero_insert_id_of_a_multi_statement_is_kept() -> None:
    more = ServerStatus(int(AUTOCOMMIT) | int(ServerStatus.MORE_RESULTS_EXISTS))
    first = frame(build_ok(OkPacket(affected_rows=1, last_insert_id=41, status=more), BACKEND), 1)
    second = frame(build_ok(OkPacket(affected_rows=1, status=AUTOCOMMIT), BACKEND), 2)
    _out, relay, _ = relay_all(first + second, BACKEND, BACKEND, [])
    assert relay.done
    assert relay.insert_id == 41
    relay.reuse(ResponseKind.QUERY, HINT)
    assert relay.insert_id == 0
