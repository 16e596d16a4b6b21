"""Packet framing (MySQL doc page_protocol_basic_packets): 3-byte length, sequence id, payloads
of 0xFFFFFF bytes or more split into full packets plus a shorter (possibly empty) last one."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.constants import MAX_PACKET_PAYLOAD
from consistent.protocol.framing import Packet, PacketDecoder, frame_packet, frame_packets

FULL = MAX_PACKET_PAYLOAD


def split_wire(wire: bytes) -> list[tuple[int, int, bytes]]:
    """Independent reading of framed bytes: (length, seq, payload) per physical packet."""
    out = []
    pos = 0
    while pos < len(wire):
        length = wire[pos] | wire[pos + 1] << 8 | wire[pos + 2] << 16
        seq = wire[pos + 3]
        out.append((length, seq, wire[pos + 4 : pos + 4 + length]))
        pos += 4 + length
    assert pos == len(wire)
    return out


def test_small_payload_header() -> None:
    # COM_QUERY "select 1" as sent with sequence id 0: 09 00 00 00 03 ...
    wire, nxt = frame_packets(b"\x03select 1", 0)
    assert wire == bytes.fromhex("09 00 00 00") + b"\x03select 1"
    assert nxt == 1
    assert frame_packet(b"\x03select 1", 0) == wire


def test_empty_payload_is_one_empty_packet() -> None:
    assert frame_packets(b"", 7) == (bytes.fromhex("00 00 00 07"), 8)


def test_sequence_id_wraps() -> None:
    wire, nxt = frame_packets(b"x", 255)
    assert wire[3] == 255
    assert nxt == 0


@pytest.mark.parametrize("seq", [-1, 256])
def test_bad_sequence_id_is_local_error(seq: int) -> None:
    with pytest.raises(LocalProtocolError):
        frame_packets(b"x", seq)


def test_exactly_one_full_packet_needs_an_empty_trailer() -> None:
    payload = b"a" * FULL
    wire, nxt = frame_packets(payload, 3)
    parts = split_wire(wire)
    assert [(n, s) for n, s, _ in parts] == [(FULL, 3), (0, 4)]
    assert nxt == 5
    assert wire[:4] == bytes.fromhex("ff ff ff 03")
    assert wire[-4:] == bytes.fromhex("00 00 00 04")


def test_two_full_packets_and_a_remainder() -> None:
    payload = bytes(range(256)) * ((2 * FULL + 10) // 256) + b"z" * ((2 * FULL + 10) % 256)
    assert len(payload) == 2 * FULL + 10
    wire, nxt = frame_packets(payload, 254)
    parts = split_wire(wire)
    assert [(n, s) for n, s, _ in parts] == [(FULL, 254), (FULL, 255), (10, 0)]
    assert b"".join(p for _, _, p in parts) == payload
    assert nxt == 1


def test_two_full_packets_exactly() -> None:
    wire, nxt = frame_packets(b"b" * (2 * FULL), 0)
    assert [(n, s) for n, s, _ in split_wire(wire)] == [(FULL, 0), (FULL, 1), (0, 2)]
    assert nxt == 3


def test_frame_packet_refuses_what_needs_splitting() -> None:
    with pytest.raises(LocalProtocolError):
        frame_packet(b"c" * FULL, 0)


def test_decoder_joins_continuations_in_random_chunks() -> None:
    rng = random.Random(1234)
    big = rng.randbytes(FULL + 17)
    exact = rng.randbytes(FULL)
    wire = b"".join(
        [
            frame_packets(b"first", 9)[0],
            frame_packets(big, 0)[0],
            frame_packets(exact, 200)[0],
            frame_packets(b"last", 0)[0],
        ]
    )
    decoder = PacketDecoder(max_payload=2 * FULL)
    got: list[Packet] = []
    pos = 0
    while pos < len(wire):
        step = rng.choice([1, 3, 4, 5, 1000, 65536, 3_000_000])
        got.extend(decoder.feed(wire[pos : pos + step]))
        pos += step
    assert got == [
        Packet(9, b"first"),
        Packet(0, big, fragments=2),
        Packet(200, exact, fragments=2),
        Packet(0, b"last"),
    ]
    assert got[1].next_seq == 2
    assert got[2].next_seq == 202
    assert not decoder.in_packet
    assert decoder.buffered == 0


payloads = st.lists(st.tuples(st.integers(0, 255), st.binary(max_size=300)), max_size=12)


@settings(max_examples=200)
@given(payloads, st.data())
def test_decoder_any_chunking(packets: list[tuple[int, bytes]], data: st.DataObject) -> None:
    wire = b"".join(frame_packet(p, seq) for seq, p in packets)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=20)))
    decoder = PacketDecoder()
    got: list[Packet] = []
    prev = 0
    for cut in [*cuts, len(wire)]:
        got.extend(decoder.feed(memoryview(wire)[prev:cut]))
        prev = cut
    assert [(p.seq, p.payload) for p in got] == packets
    assert decoder.buffered == 0


def test_decoder_keeps_partial_packet() -> None:
    decoder = PacketDecoder()
    assert decoder.feed(bytes.fromhex("05 00 00 00 01 02")) == []
    assert decoder.in_packet
    assert decoder.buffered == 6
    assert decoder.feed(bytes.fromhex("03 04 05 00 00")) == [Packet(0, b"\x01\x02\x03\x04\x05")]
    assert decoder.feed(bytes.fromhex("00 01")) == [Packet(1, b"")]


def test_decoder_bound_rejects_before_buffering() -> None:
    decoder = PacketDecoder(max_payload=100)
    with pytest.raises(RemoteProtocolError):
        decoder.feed(bytes.fromhex("65 00 00 00"))  # announces 101 bytes
    ok = PacketDecoder(max_payload=100)
    assert ok.feed(bytes.fromhex("64 00 00 00") + b"x" * 100) == [Packet(0, b"x" * 100)]


def test_decoder_bound_counts_continuations() -> None:
    decoder = PacketDecoder(max_payload=FULL + 5)
    decoder.feed(bytes.fromhex("ff ff ff 00") + b"\x00" * FULL)
    with pytest.raises(RemoteProtocolError):
        decoder.feed(bytes.fromhex("06 00 00 01"))


def test_decoder_rejects_out_of_order_continuation() -> None:
    decoder = PacketDecoder(max_payload=2 * FULL)
    decoder.feed(bytes.fromhex("ff ff ff 04") + b"\x00" * FULL)
    with pytest.raises(RemoteProtocolError):
        decoder.feed(bytes.fromhex("01 00 00 06 00"))


@given(st.binary(max_size=200), st.integers(0, 1000))
def test_decoder_garbage_only_raises_remote_errors(garbage: bytes, bound: int) -> None:
    decoder = PacketDecoder(max_payload=bound)
    try:
        for packet in decoder.feed(garbage):
            assert len(packet.payload) <= bound
    except RemoteProtocolError:
        pass


def test_negative_bound_is_local_error() -> None:
    with pytest.raises(LocalProtocolError):
        PacketDecoder(max_payload=-1)
