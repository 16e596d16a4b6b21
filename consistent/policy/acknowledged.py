"""What the primary acknowledged to any session of this process (or of this proxy).

``read_all_writes`` promises that a read sees every write the process had had acknowledged
before the read began (DESIGN "Consistency levels").  The process already receives all it needs
for that: the primary's OK packets report, to every session at every level, the GTIDs its
statements committed (MySQL ``OWN_GTID``, or the primary's whole executed set under
``ALL_GTIDS``; MariaDB ``last_gtid``).  :class:`AcknowledgedWrites` merges them, for one
primary, and a read at ``read_all_writes`` requires the merged state as it is when the read is
routed: no round trip, on either flavour.

The state only grows: a union of GTID sets on MySQL, the highest sequence number per domain on
MariaDB (:func:`~consistent.policy.states.merge`, the policy's one GTID algebra), so GTIDs that
arrive out of order (two sessions committing at once) never lower it.  It is shared by threads
(the DB-API wrapper's connections, SQLAlchemy's pool) and locked accordingly.

The wrapper hands over each OK packet's raw tail as it arrives (:meth:`note_tail`), since
decoding and parsing are the largest part of what it adds to a write: the tails are decoded
together, when a read needs the state or once :data:`TEXT_BATCH` are waiting.  Texts
already decoded are handed over with :meth:`note`.  MariaDB's ``last_gtid`` is one plain
``domain-server-seq``: only the highest per domain matters, so :meth:`note` keeps that one, by
number, as the merge would (three ``int()``, no GTID objects).  Other texts (MySQL's, or MariaDB
text of any other shape) are parsed when a read needs the state, or in batches.  The proxy,
which parses OK packets anyway, hands over states (:meth:`add`).

A state learnt here stays true for as long as the primary at that address keeps its GTID
history.  A primary replaced by one whose history went backwards (a server rebuilt from
scratch) would make reads wait for GTIDs it never executes: :meth:`forget` drops the state.
"""

from __future__ import annotations

import functools
import threading
from typing import Final

from consistent.errors import MalformedGtid, MalformedGtidSet, RemoteProtocolError
from consistent.gtid import GtidState, MariaGtid, MariaPosition
from consistent.policy.states import FlavorName, merge, parse_state, parse_tracked
from consistent.protocol.session_state import ok_tail_gtid_text

__all__ = ["TEXT_BATCH", "AcknowledgedWrites", "process_acknowledged"]

#: Raw texts kept before they are parsed anyway (bounds memory when nothing reads the state).
TEXT_BATCH: Final = 256
_U32_MAX: Final = 2**32 - 1
_U64_MAX: Final = 2**64 - 1


class AcknowledgedWrites:
    """Thread-safe, growing state of everything one primary acknowledged to this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: GtidState | None = None
        self._texts: list[str] = []
        self._text_flavor: FlavorName = "mysql"
        # MariaDB GTIDs noted since the last parse: the highest (seq_no, server_id) per domain.
        self._tops: dict[int, tuple[int, int]] = {}
        # OK packets' tails not decoded yet.
        self._tails: list[bytes] = []

    def add(self, state: GtidState) -> None:
        """The primary reported ``state`` in an OK packet (of any session)."""
        if not state:
            return
        with self._lock:
            self._state = merge(self._state, state)

    def note(self, text: str, flavor: FlavorName) -> None:
        """An OK packet's raw GTID text in ``flavor``'s syntax, parsed when the state is next
        read (or once :data:`TEXT_BATCH` texts are waiting).  A MariaDB GTID only replaces a
        lower one of its domain noted since."""
        with self._lock:
            self._text_flavor = flavor
            self._keep(text, flavor)
            if len(self._texts) + len(self._tops) >= TEXT_BATCH:
                self._parse_texts()

    def _keep(self, text: str, flavor: FlavorName) -> None:
        # Callers hold the lock.
        gtid = _plain_maria_gtid(text) if flavor == "mariadb" else None
        if gtid is None:
            self._texts.append(text)
            return
        domain, seq_no, server_id = gtid
        tops = self._tops
        top = tops.get(domain)
        if top is None or seq_no > top[0] or (seq_no == top[0] and server_id > top[1]):
            tops[domain] = (seq_no, server_id)

    def note_tail(self, tail: bytes, flavor: FlavorName) -> None:
        """An OK packet's raw tail (the bytes after its warning count), whose tracker text in
        ``flavor``'s syntax is decoded when the state is next read (or once
        :data:`TEXT_BATCH` tails are waiting).  A tail that does not decode is
        skipped: the session that received it reports it."""
        with self._lock:
            self._text_flavor = flavor
            tails = self._tails
            tails.append(tail)
            if len(tails) >= TEXT_BATCH:
                self._parse_texts()

    def state(self) -> GtidState | None:
        """Everything acknowledged so far (``None`` before the first write).  The object is
        immutable; a new one replaces it when something new is acknowledged."""
        if not self._texts and not self._tops and not self._tails:
            # Nothing waits to be parsed: the last state is the answer (reading attributes
            # needs no lock, and a text noted from now on belongs to a later read).
            return self._state
        with self._lock:
            if self._texts or self._tops or self._tails:
                self._parse_texts()
            return self._state

    def forget(self) -> None:
        """Drop everything (the primary at this address was replaced by one whose GTID
        history went backwards)."""
        with self._lock:
            self._state = None
            self._texts = []
            self._tops = {}
            self._tails = []

    def _parse_texts(self) -> None:
        # Callers hold the lock.  MySQL texts are parsed together (one set, one parse);
        # MariaDB ones one by one, since a position has one GTID per domain and the merge keeps
        # the highest.  A text that does not parse is the server's fault; the session that
        # received it reports it (its own copy goes through the same parser).
        # The texts are dropped only once the state includes them: :meth:`state` reads both
        # without the lock and must never see neither.
        flavor = self._text_flavor
        if self._tails:  # the tails stay until the state includes them
            for text in _decoded(self._tails):
                self._keep(text, flavor)
        texts = self._texts
        state = self._state
        tops = self._tops
        if tops:
            position = MariaPosition(
                [
                    MariaGtid(domain, server_id, seq_no)
                    for domain, (seq_no, server_id) in tops.items()
                ]
            )
            state = merge(state, position)
        if texts and flavor == "mysql":
            state = merge(state, _parsed(",".join(texts), flavor))
        else:
            for text in texts:
                state = merge(state, _parsed(text, flavor))
        self._state = state
        self._texts = []
        self._tops = {}
        self._tails = []


def _decoded(tails: list[bytes]) -> list[str]:
    """The GTID texts ``tails`` carry (tails with none, or that do not decode, give none)."""
    texts: list[str] = []
    for tail in tails:
        try:
            text = ok_tail_gtid_text(tail)
        except RemoteProtocolError:
            continue
        if text is not None:
            texts.append(text)
    return texts


def _plain_maria_gtid(text: str) -> tuple[int, int, int] | None:
    """``(domain, seq_no, server_id)`` of a plain ``domain-server-seq`` text, the shape of
    MariaDB's ``last_gtid`` (ASCII digits, numbers in range); ``None`` for anything else,
    which the general parser then judges."""
    parts = text.split("-")
    if len(parts) != 3 or not text.isascii():
        return None
    domain, server_id, seq_no = parts
    if not (domain.isdigit() and server_id.isdigit() and seq_no.isdigit()):
        return None
    d, s, n = int(domain), int(server_id), int(seq_no)
    if d > _U32_MAX or s > _U32_MAX or n > _U64_MAX:
        return None
    return d, n, s


def _parsed(text: str, flavor: FlavorName) -> GtidState | None:
    try:
        return parse_tracked(text, flavor)
    except (MalformedGtidSet, MalformedGtid):
        return _each(text, flavor)  # one bad text must not lose the batch


def _each(text: str, flavor: FlavorName) -> GtidState | None:
    """The parts of a joined MySQL batch that parse, when one of them does not."""
    if flavor != "mysql":
        return None
    state: GtidState | None = None
    for part in text.split(","):
        try:
            state = merge(state, parse_state(part, flavor))
        except (MalformedGtidSet, MalformedGtid):
            continue
    return state


@functools.cache
def process_acknowledged(primary: str) -> AcknowledgedWrites:
    """The acknowledged state every session of this process shares for the primary named
    ``primary`` (its ``host:port``).  Like :func:`~consistent.policy.process_knowledge`, this
    is process state on purpose: what the primary acknowledged is a fact about the server.
    Pass an explicit :class:`AcknowledgedWrites` to isolate sessions."""
    return AcknowledgedWrites()
