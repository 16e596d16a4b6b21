"""GTID sets as span attributes: in full up to a size, then a digest and a count.

A session's required set is usually one interval (``uuid:1-42``), but a long-lived
``read_latest`` session or a server with many sources can carry sets of thousands of
characters, and copying that into every span would make the traces mostly GTID text.  So the
text is recorded only while it is at most ``max_chars`` characters; beyond that the text
attribute is left out and ``<name>.digest`` (``sha256:`` + hex of the same text) stands in for
it, which still lets analytics tell equal sets apart.  ``<name>.count`` is always recorded: the
number of transactions of a MySQL set, the number of domains of a MariaDB position.  Beside a
MySQL set's digest, ``<name>.high`` gives the last GTID of each source (``uuid:N``, a subset of
the set: a few dozen characters per source, while the set's own text grows with every gap), which
is all the audit needs of a set (a replica applies each source's transactions in order).

The text is the single-line form (``GtidSet.to_text(",")``, MariaDB's ``str()``), so that a
value can be pasted back into ``WAIT_FOR_EXECUTED_GTID_SET`` or ``MASTER_GTID_WAIT``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from consistent.gtid import GtidSet, GtidState
from consistent.trace import (
    COUNT_SUFFIX,
    DIGEST_PREFIX,
    DIGEST_SUFFIX,
    HIGH_SUFFIX,
    AttributeValue,
)

__all__ = ["GtidAttribute", "gtid_attribute", "gtid_high_text", "gtid_text", "put_gtid_attributes"]


@dataclass(frozen=True, slots=True)
class GtidAttribute:
    """How one GTID state is recorded: exactly one of ``text`` and ``digest`` is set; with a
    digest, ``high`` may be (see :func:`gtid_high_text`)."""

    count: int
    text: str | None = None
    digest: str | None = None
    high: str | None = None


def gtid_text(state: GtidState) -> str:
    """The state's single-line text."""
    if isinstance(state, GtidSet):
        return state.to_text(",")
    return str(state)


def gtid_high_text(state: GtidState) -> str | None:
    """A MySQL set's last GTID of each source, as one line of GTID text (``uuid:N,uuid2:M``,
    tagged ``uuid:tag:N``): a subset of the set that reaches as far; ``None`` for a MariaDB
    position, which already is one GTID per domain."""
    if not isinstance(state, GtidSet):
        return None
    last: dict[tuple[str, str | None], int] = {}
    for uuid, tag, _start, end in state.intervals():  # ascending per source: the last wins
        last[uuid, tag] = end
    return GtidSet.from_intervals({key: [(gno, gno)] for key, gno in last.items()}).to_text(",")


def gtid_attribute(state: GtidState, max_chars: int) -> GtidAttribute:
    """The text of ``state`` when it has at most ``max_chars`` characters, else its digest
    and, when that fits, its last GTID per source; with its count either way."""
    text = gtid_text(state)
    count = len(state)
    if len(text) <= max_chars:
        return GtidAttribute(count, text=text)
    digest = DIGEST_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()
    high = gtid_high_text(state)
    if high is not None and len(high) > max_chars:
        high = None
    return GtidAttribute(count, digest=digest, high=high)


def put_gtid_attributes(
    attributes: dict[str, AttributeValue], name: str, state: GtidState | None, max_chars: int
) -> None:
    """Add ``name`` (or ``name.digest`` and, when it fits, ``name.high``) and ``name.count``
    for ``state``; nothing for ``None``."""
    if state is None:
        return
    recorded = gtid_attribute(state, max_chars)
    if recorded.text is not None:
        attributes[name] = recorded.text
    if recorded.digest is not None:
        attributes[name + DIGEST_SUFFIX] = recorded.digest
    if recorded.high is not None:
        attributes[name + HIGH_SUFFIX] = recorded.high
    attributes[name + COUNT_SUFFIX] = recorded.count
