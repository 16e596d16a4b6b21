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

The wrapper hands over the tracker's raw text as each OK packet arrives (:meth:`note`), since
parsing is the largest part of what it adds to a write; texts are parsed when a read needs the
state, or in batches.  The proxy, which parses OK packets anyway, hands over states
(:meth:`add`).

A state learnt here stays true for as long as the primary at that address keeps its GTID
history.  A primary replaced by one whose history went backwards (a server rebuilt from
scratch) would make reads wait for GTIDs it never executes: :meth:`forget` drops the state.
"""

from __future__ import annotations

import functools
import threading
from typing import Final

from consistent.errors import MalformedGtid, MalformedGtidSet
from consistent.gtid import GtidState
from consistent.policy.states import FlavorName, merge, parse_state, parse_tracked

__all__ = ["TEXT_BATCH", "AcknowledgedWrites", "process_acknowledged"]

#: Raw texts kept before they are parsed anyway (bounds memory when nothing reads the state).
TEXT_BATCH: Final = 256


class AcknowledgedWrites:
    """Thread-safe, growing state of everything one primary acknowledged to this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: GtidState | None = None
        self._texts: list[str] = []
        self._text_flavor: FlavorName = "mysql"

    def add(self, state: GtidState) -> None:
        """The primary reported ``state`` in an OK packet (of any session)."""
        if not state:
            return
        with self._lock:
            self._state = merge(self._state, state)

    def note(self, text: str, flavor: FlavorName) -> None:
        """An OK packet's raw GTID text in ``flavor``'s syntax, parsed when the state is next
        read (or once :data:`TEXT_BATCH` texts are waiting)."""
        with self._lock:
            texts = self._texts
            texts.append(text)
            self._text_flavor = flavor
            if len(texts) >= TEXT_BATCH:
                self._parse_texts()

    def state(self) -> GtidState | None:
        """Everything acknowledged so far (``None`` before the first write).  The object is
        immutable; a new one replaces it when something new is acknowledged."""
        if not self._texts:
            # Nothing waits to be parsed: the last state is the answer (reading one attribute
            # needs no lock, and a text noted from now on belongs to a later read).
            return self._state
        with self._lock:
            if self._texts:
                self._parse_texts()
            return self._state

    def forget(self) -> None:
        """Drop everything (the primary at this address was replaced by one whose GTID
        history went backwards)."""
        with self._lock:
            self._state = None
            self._texts = []

    def _parse_texts(self) -> None:
        # Callers hold the lock.  MySQL texts are parsed together (one set, one parse);
        # MariaDB ones one by one, since a position has one GTID per domain and the merge keeps
        # the highest.  A text that does not parse is the server's fault; the session that
        # received it reports it (its own copy goes through the same parser).
        # The texts are dropped only once the state includes them: :meth:`state` reads both
        # without the lock and must never see neither.
        texts = self._texts
        flavor = self._text_flavor
        state = self._state
        if flavor == "mysql":
            state = merge(state, _parsed(",".join(texts), flavor))
        else:
            for text in texts:
                state = merge(state, _parsed(text, flavor))
        self._state = state
        self._texts = []


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
