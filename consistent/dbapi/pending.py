"""GTID texts from OK packets, kept unparsed until the policy needs them.

Parsing a GTID text costs more than the rest of what the wrapper adds to a statement, and most
texts are superseded before anyone looks: on MariaDB a session's later ``last_gtid`` in a domain
covers its earlier ones, and with no replica to route to, only ``token`` ever reads the set.  So
the connection notes texts here and drains them into the policy right before a routing decision
or a token is needed; MySQL texts are drained in batches (one parse for many), MariaDB texts
keep only the latest per server and domain.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from consistent.errors import MalformedGtidSet, RemoteProtocolError
from consistent.gtid import GtidState
from consistent.policy.states import FlavorName, parse_tracked

__all__ = ["PendingGtids", "parse_tracked"]

#: MySQL texts kept before a batch is parsed anyway (bounds memory on write-only sessions).
MYSQL_BATCH: Final = 256


class PendingGtids:
    """Unparsed GTID texts per target (``"primary"`` or a replica name)."""

    __slots__ = ("_count", "_flavor", "_tags", "_texts")

    def __init__(self, flavor: FlavorName, *, tags: bool = True) -> None:
        self._flavor: FlavorName = flavor
        self._tags = tags
        self._texts: dict[str, dict[str, str]] = {}
        self._count = 0

    def __bool__(self) -> bool:
        return self._count > 0

    def add(self, target: str, text: str) -> bool:
        """Note ``text``; True when enough is pending that it should be drained now."""
        texts = self._texts.get(target)
        if texts is None:
            texts = self._texts[target] = {}
        if self._flavor == "mariadb" and "," not in text:
            # One GTID: the same session's later GTID in a domain supersedes it.
            texts[text.partition("-")[0]] = text
        else:
            texts[text] = text
        self._count += 1
        return self._count >= MYSQL_BATCH

    def drain(self) -> Iterator[tuple[str, GtidState]]:
        """Parse and forget everything pending: one merged state per target."""
        pending, self._texts, self._count = self._texts, {}, 0
        for target, texts in pending.items():
            try:
                yield target, parse_tracked(",".join(texts.values()), self._flavor, tags=self._tags)
            except MalformedGtidSet as exc:
                raise RemoteProtocolError(
                    f"the server reported GTIDs that do not parse: {exc.msg}"
                ) from exc
