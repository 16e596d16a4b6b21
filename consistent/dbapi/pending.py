"""GTIDs from OK packets, kept undecoded and unparsed until the policy needs them.

Parsing a GTID text costs more than the rest of what the wrapper adds to a statement, and most
texts are superseded before anyone looks: on MariaDB a session's later ``last_gtid`` in a domain
covers its earlier ones, and with no replica to route to, only ``token`` ever reads the set.  So
the connection notes texts here and drains them into the policy right before a routing decision
or a token is needed; MySQL texts are drained in batches (one parse for many), MariaDB texts
keep only the latest per server and domain.  OK packets' raw tails (:meth:`PendingGtids.add_tail`)
are decoded at the same time, all together: the statement that received one pays only for
noting it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Final

from consistent.errors import MalformedGtidSet, RemoteProtocolError
from consistent.gtid import GtidState
from consistent.policy.states import FlavorName, parse_tracked
from consistent.protocol.session_state import ok_tail_gtid_text

__all__ = ["PendingGtids", "parse_tracked"]

#: MySQL texts kept before a batch is parsed anyway (bounds memory on write-only sessions).
MYSQL_BATCH: Final = 256

logger = logging.getLogger(__name__)


class PendingGtids:
    """Unparsed GTID texts, and undecoded OK tails, per target (``"primary"`` or a replica
    name)."""

    __slots__ = ("_count", "_flavor", "_tags", "_tails", "_texts")

    def __init__(self, flavor: FlavorName, *, tags: bool = True) -> None:
        self._flavor: FlavorName = flavor
        self._tags = tags
        self._texts: dict[str, dict[str, str]] = {}
        self._tails: dict[str, list[bytes]] = {}
        self._count = 0

    def __bool__(self) -> bool:
        return self._count > 0

    def add(self, target: str, text: str) -> bool:
        """Note ``text``; True when enough is pending that it should be drained now."""
        if self._tails:  # the tails came first: a later text must supersede theirs
            self._decode_tails()
        self._keep(target, text)
        self._count += 1
        return self._count >= MYSQL_BATCH

    def add_tail(self, target: str, tail: bytes) -> bool:
        """Note an OK packet's tail (the bytes after its warning count), decoded when
        drained; True when enough is pending that it should be drained now.  A tail that does
        not decode is logged and dropped then, and one without GTIDs adds nothing."""
        tails = self._tails.get(target)
        if tails is None:
            tails = self._tails[target] = []
        tails.append(tail)
        self._count += 1
        return self._count >= MYSQL_BATCH

    def _keep(self, target: str, text: str) -> None:
        texts = self._texts.get(target)
        if texts is None:
            texts = self._texts[target] = {}
        if self._flavor == "mariadb" and "," not in text:
            # One GTID: the same session's later GTID in a domain supersedes it.
            texts[text.partition("-")[0]] = text
        else:
            texts[text] = text

    def _decode_tails(self) -> None:
        tails, self._tails = self._tails, {}
        for target, received in tails.items():
            for tail in received:
                try:
                    text = ok_tail_gtid_text(tail)
                except RemoteProtocolError:
                    logger.warning("undecodable session-state data from %s: %r", target, tail)
                    continue
                if text is not None:
                    self._keep(target, text)

    def drain(self) -> Iterator[tuple[str, GtidState]]:
        """Decode, parse and forget everything pending: one merged state per target."""
        if self._tails:
            self._decode_tails()
        pending, self._texts, self._count = self._texts, {}, 0
        for target, texts in pending.items():
            try:
                yield target, parse_tracked(",".join(texts.values()), self._flavor, tags=self._tags)
            except MalformedGtidSet as exc:
                raise RemoteProtocolError(
                    f"the server reported GTIDs that do not parse: {exc.msg}"
                ) from exc
