"""The headline table: per consistency level, what the analysis of the traces found, beside
what the clients saw on the data.

Built from the analysis' small result tables (``cost_by_level`` and ``read_summary`` rows, as
:class:`analytics.report.ReportData` holds them) and the workload's own counts, with no Spark
and no I/O, so it is tested on plain values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from consistent.demo.workload import GUARANTEED_LEVELS, LEVELS, Totals

__all__ = ["HeadlineRow", "build_headline", "failures", "ground_truth_table", "headline_table"]

Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class HeadlineRow:
    """One level's numbers.  ``None`` means the traces had nothing to say."""

    level: str
    #: Reads in the traces, and the share a replica served.
    reads: int
    replica_share: float | None
    #: Replica reads the audit proved stale (read-your-writes violations), and those it could
    #: neither prove covered nor stale.
    audit_stale: int
    audit_unproven: int
    #: Wait for a replica to catch up, over the reads that waited (milliseconds).
    wait_p50_ms: float | None
    wait_p99_ms: float | None
    #: Reads that wanted a replica and ran on the primary.
    fallbacks: int
    #: What the clients saw: reads, and reads that missed the session's own write.
    client_reads: int
    client_stale: int

    @property
    def guaranteed(self) -> bool:
        """The level promises read-your-writes."""
        return self.level in GUARANTEED_LEVELS


def _by_level(rows: Iterable[Row]) -> dict[str, Row]:
    return {str(row["level"]): row for row in rows if row.get("level") is not None}


def _int(row: Row | None, name: str) -> int:
    return int(row.get(name) or 0) if row is not None else 0


def _float(row: Row | None, name: str) -> float | None:
    value = row.get(name) if row is not None else None
    return None if value is None else float(value)


def build_headline(
    cost: Sequence[Row], reads: Sequence[Row], ground_truth: Mapping[str, Totals]
) -> list[HeadlineRow]:
    """One row per level in :data:`~demo.workload.LEVELS` order; ``cost`` and ``reads`` are
    the analysis' ``cost_by_level`` and ``read_summary`` rows, ``ground_truth`` the clients'
    counts by level."""
    costs, audits = _by_level(cost), _by_level(reads)
    rows = []
    for level in LEVELS:
        spent, audit = costs.get(level), audits.get(level)
        seen = ground_truth.get(level, Totals())
        total = _int(spent, "reads")
        rows.append(
            HeadlineRow(
                level=level,
                reads=total,
                replica_share=_int(spent, "replica_reads") / total if total else None,
                audit_stale=_int(audit, "stale"),
                audit_unproven=_int(audit, "unproven"),
                wait_p50_ms=_float(spent, "wait_p50_ms"),
                wait_p99_ms=_float(spent, "wait_p99_ms"),
                fallbacks=_int(spent, "fallbacks"),
                client_reads=seen.reads,
                client_stale=seen.stale,
            )
        )
    return rows


def failures(rows: Iterable[HeadlineRow]) -> list[str]:
    """What broke a guarantee, one line per guaranteed level that shows a violation (by the
    audit or by the clients); empty when every promise held."""
    found = []
    for row in rows:
        if not row.guaranteed:
            continue
        if row.audit_stale:
            found.append(f"{row.level}: the audit found {row.audit_stale} stale replica reads")
        if row.client_stale:
            found.append(
                f"{row.level}: clients read {row.client_stale} values older than their write"
            )
    return found


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f} ms"


def _verdict(count: int, row: HeadlineRow) -> str:
    if not count:
        return "0"
    return f"[bold red]{count:,}[/]" if row.guaranteed else f"[yellow]{count:,}[/]"


def headline_table(rows: Sequence[HeadlineRow], title: str = "headline") -> Table:
    """The table the demo ends with."""
    table = Table(title=title, title_justify="left")
    table.add_column("level")
    table.add_column("reads", justify="right")
    table.add_column("on replicas", justify="right")
    table.add_column("RYW violations (audit)", justify="right")
    table.add_column("unproven", justify="right")
    table.add_column("wait p50", justify="right")
    table.add_column("wait p99", justify="right")
    table.add_column("fallbacks", justify="right")
    table.add_column("stale reads seen by clients", justify="right")
    for row in rows:
        table.add_row(
            row.level,
            f"{row.reads:,}",
            _pct(row.replica_share),
            _verdict(row.audit_stale, row),
            f"{row.audit_unproven:,}",
            _ms(row.wait_p50_ms),
            _ms(row.wait_p99_ms),
            f"{row.fallbacks:,}",
            f"{_verdict(row.client_stale, row)} / {row.client_reads:,}",
        )
    return table


def ground_truth_table(totals: Mapping[str, Totals], title: str) -> Table:
    """The clients' own counts per key (level, or level and path)."""
    table = Table(title=title, title_justify="left")
    for name in ("", "sessions", "statements", "reads", "on replicas", "stale seen", "errors"):
        table.add_column(name, justify="left" if not name else "right")
    for key, total in totals.items():
        table.add_row(
            key,
            f"{total.sessions:,}",
            f"{total.statements:,}",
            f"{total.reads:,}",
            _pct(total.replica_share),
            f"{total.stale:,}",
            f"{total.errors:,}",
        )
    return table
