"""Role changes as trace records: one :data:`~consistent.trace.ROLE_CHANGE_SPAN` each time
role discovery finds another primary, in the same stream as the statements and lag samples,
so that the analytics can mark the switchover on the lag chart's time axis.

The verdict is anything with the role discovery verdict's ``primary`` and ``writable``
(:class:`RoleMove`), so that telemetry depends on nothing inside the policy."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from consistent.telemetry.records import SpanRecord, new_span_id, new_trace_id
from consistent.trace import (
    DB_SYSTEM_NAME,
    RECORD_KIND,
    ROLE_CHANGE_SPAN,
    ROLE_PREVIOUS,
    ROLE_PRIMARY,
    ROLE_WRITABLE,
    AttributeValue,
    RecordKind,
    SpanKind,
)

__all__ = ["RoleMove", "role_change_record"]


class RoleMove(Protocol):
    """Where role discovery found the primary (``consistent.policy``'s verdict has these)."""

    @property
    def primary(self) -> str:
        """The server writes go to now."""

    @property
    def writable(self) -> Sequence[str]:
        """The reachable servers that accept writes and do not replicate."""


def role_change_record(
    previous: str, verdict: RoleMove, system: str, *, at_ns: int | None = None
) -> SpanRecord:
    """The record of the primary moving from ``previous`` to ``verdict.primary``."""
    now = time.time_ns() if at_ns is None else at_ns
    attributes: dict[str, AttributeValue] = {
        RECORD_KIND: RecordKind.ROLE_CHANGE.value,
        DB_SYSTEM_NAME: system,
        ROLE_PRIMARY: verdict.primary,
        ROLE_PREVIOUS: previous,
        ROLE_WRITABLE: ",".join(verdict.writable),
    }
    return SpanRecord(
        name=ROLE_CHANGE_SPAN,
        kind=SpanKind.INTERNAL,
        trace_id=new_trace_id(),
        span_id=new_span_id(),
        start_ns=now,
        end_ns=now,
        attributes=attributes,
    )
