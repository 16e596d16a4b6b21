"""The GTIDs a statement produced, as the primary reported them, turned into attributes on an
exporter thread.

The statement's thread hands over the tracker's raw text (or a state the caller had parsed
anyway): parsing it there would cost a write more than the rest of its span.  Here, a MariaDB
``last_gtid`` of the plain form ``domain-server-seq`` with canonical numbers is already the text
the trace records (``str(MariaPosition)`` of one GTID) and counts one domain, so it is written
as it is; anything else is parsed in the session's flavour, merged when a statement reported
several, and recorded as :mod:`consistent.telemetry.gtidattr` says.

The parsing and merging use :mod:`consistent.gtid` alone (``GtidSet.parse``,
``MariaPosition.parse``, their unions), the public GTID vocabulary the policy builds on, rather
than the policy's own helpers: telemetry subscribes to the front ends' events and depends on
nothing inside the policy.  A state of the other flavour than the ones before it is left out,
as a text that does not parse is.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from consistent.errors import Error
from consistent.gtid import GtidSet, GtidState, MariaPosition
from consistent.telemetry import otlpjson
from consistent.telemetry.gtidattr import put_gtid_attributes
from consistent.trace import COUNT_SUFFIX, GTID_PRODUCED, AttributeValue

__all__ = ["Produced", "add_produced", "produced_attributes", "produced_json"]

logger = logging.getLogger(__name__)

#: What a span keeps: one state or raw text, or several of them in the order reported.
Produced = GtidState | str | list[GtidState | str]

# One MariaDB GTID, numbers without leading zeros and short enough to be within range
# (domain and server id are 32-bit, the sequence number 64-bit): MariaGtid's own text.
_is_plain: Final = re.compile(
    r"(?:0|[1-9][0-9]{0,8})-(?:0|[1-9][0-9]{0,8})-(?:0|[1-9][0-9]{0,18})\Z"
).match
_STRING_HEAD: Final = ',{"key":' + otlpjson.escape(GTID_PRODUCED) + ',"value":{"stringValue":"'
_ONE_DOMAIN: Final = '"}},' + otlpjson.attribute(GTID_PRODUCED + COUNT_SUFFIX, 1)


def add_produced(previous: Produced | None, gtids: GtidState | str) -> Produced:
    """``previous`` with ``gtids`` reported after it (statement thread: no parsing)."""
    if previous is None:
        return gtids
    if isinstance(previous, list):
        previous.append(gtids)
        return previous
    return [previous, gtids]


def _plain(produced: Produced, system: str, max_chars: int) -> bool:
    """True for a lone plain MariaDB GTID that fits: its text is the one recorded."""
    return (
        type(produced) is str
        and system == "mariadb"
        and len(produced) <= max_chars
        and _is_plain(produced) is not None
    )


def _parse(text: str, system: str) -> GtidState:
    """``text`` in the syntax of ``system`` (raises :class:`~consistent.errors.Error`)."""
    if system == "mariadb":
        return MariaPosition.parse(text.strip())
    return GtidSet.parse(text)


def _merge(state: GtidState | None, more: GtidState) -> GtidState | None:
    """The union of ``state`` and ``more`` (per-domain maximum on MariaDB); ``None`` when
    their flavours differ."""
    if state is None:
        return more
    if isinstance(state, GtidSet) and isinstance(more, GtidSet):
        return state | more
    if isinstance(state, MariaPosition) and isinstance(more, MariaPosition):
        return state.merge(more)
    return None


def _state(produced: Produced, system: str) -> GtidState | None:
    """Everything reported, parsed and merged; ``None`` (logged) when a text does not parse or
    the flavours disagree."""
    items = produced if isinstance(produced, list) else [produced]
    state: GtidState | None = None
    try:
        for item in items:
            state = _merge(state, _parse(item, system) if isinstance(item, str) else item)
            if state is None:
                logger.debug("produced GTIDs of both flavours left out of a span")
                return None
    except Error as exc:
        logger.debug("produced GTIDs left out of a span: %s", exc)
        return None
    return state


def produced_attributes(
    produced: Produced, system: str, max_chars: int
) -> Mapping[str, AttributeValue]:
    """The ``consistent.gtid.produced*`` attributes (empty when nothing usable was reported)."""
    attributes: dict[str, AttributeValue] = {}
    if _plain(produced, system, max_chars):
        assert isinstance(produced, str)
        attributes[GTID_PRODUCED] = produced
        attributes[GTID_PRODUCED + COUNT_SUFFIX] = 1
    else:
        put_gtid_attributes(attributes, GTID_PRODUCED, _state(produced, system), max_chars)
    return MappingProxyType(attributes)


def produced_json(produced: Produced, system: str, max_chars: int) -> str:
    """The same attributes as OTLP JSON ``KeyValue`` objects, each after a comma (to follow
    other attributes; ``""`` when none)."""
    if (
        type(produced) is str
        and system == "mariadb"
        and len(produced) <= max_chars
        and _is_plain(produced) is not None
    ):
        # Digits and hyphens only: nothing to escape.
        return _STRING_HEAD + produced + _ONE_DOMAIN
    return "".join(
        "," + otlpjson.attribute(key, value)
        for key, value in produced_attributes(produced, system, max_chars).items()
    )
