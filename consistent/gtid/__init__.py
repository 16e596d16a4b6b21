"""GTIDs and GTID sets of both flavours: MySQL's ``uuid[:tag]:intervals`` and MariaDB's
``domain-server-seq`` positions.

The MySQL parser reads the syntax of a server version: tags only from 8.3 (``tags=False``
gives 8.0's grammar; :func:`gtid_tags_in` says which a version string speaks).  With tags it
accepts exactly what mysqld 8.4 accepts (``Gtid_set::add_gtid_text`` in
``sql/rpl_gtid_set.cc`` with ``Tsid``/``Tag::from_cstring`` from ``libs/mysql/gtid``), including its
oddities: whitespace almost anywhere, empty entries, ``strtoll`` base-0 numbers (``0x10``,
``010``), silently dropped ``end < start`` intervals, and 8.4's blank item after a colon that
counts as "no tag" (``uuid:1: `` parses; 8.0 rejected it).  Canonical text takes a regex fast
path; everything else goes through a character scanner written after the C code.  ``str()``
prints what mysqld prints, so a set read from an OK packet, a server variable or our own code has
one canonical text.

A :class:`GtidSet` is immutable.  It maps each transaction source (the UUID, or ``uuid:tag``) to a
sorted tuple of half-open intervals inside a HAMT (:class:`immutables.Map`), so adding a GTID or
testing membership costs ``O(log U)`` in the number of sources plus a binary search (and, for
``add``, a C-level copy) of that one source's intervals.  Sets with thousands of UUIDs, common
after many failovers, stay cheap; unchanged sources are shared between sets.
"""

from __future__ import annotations

from typing import TypeAlias

# The scanners' entry points stay importable here for the table and property tests.
from consistent.gtid._scan import _parse_set_fast as _parse_set_fast
from consistent.gtid._scan import _parse_set_slow as _parse_set_slow
from consistent.gtid._scan import _strtoll as _strtoll
from consistent.gtid._scan import _tag_from_cstring as _tag_from_cstring
from consistent.gtid._scan import _tsid_from_cstring as _tsid_from_cstring
from consistent.gtid.mariadb import MariaGtid, MariaPosition
from consistent.gtid.mysql import MAX_GNO, TAGS_SINCE, Gtid, GtidSet, gtid_tags_in

__all__ = [
    "MAX_GNO",
    "TAGS_SINCE",
    "Gtid",
    "GtidSet",
    "GtidState",
    "MariaGtid",
    "MariaPosition",
    "gtid_tags_in",
]

#: Either flavour's GTID state, for code that does not care which server it talks to.
GtidState: TypeAlias = GtidSet | MariaPosition
