"""Where a run's outputs go, and the settings every job shares.

``OUT/tables/<name>/`` holds one Parquet table per result, ``OUT/report.html`` the report (its
PNGs also in ``OUT/img/``), ``OUT/summary.json`` the headline numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pyspark.sql.types import StructType

from analytics.audit import READ_AUDIT, VIOLATIONS
from analytics.schema import LAG_SAMPLE, ROLE_CHANGE, STATEMENT

__all__ = ["TABLE_SCHEMAS", "JobSettings", "Layout"]

#: Input tables read back with an explicit schema.
TABLE_SCHEMAS: Final[dict[str, StructType]] = {
    "statements": STATEMENT,
    "lag_samples": LAG_SAMPLE,
    "role_changes": ROLE_CHANGE,
    "read_audit": READ_AUDIT,
    "violations": VIOLATIONS,
}


_RECORD_TABLES: Final = {
    "statements": "statement",
    "lag_samples": "lag_sample",
    "role_changes": "role_change",
}


@dataclass(frozen=True, slots=True)
class Layout:
    """The output directory of one run."""

    root: Path

    def table(self, name: str) -> str:
        """The Parquet directory of table ``name`` (``statements`` and ``lag_samples`` are the
        two partitions of :attr:`records`)."""
        kind = _RECORD_TABLES.get(name)
        if kind is not None:
            return f"{self.records}/record={kind}"
        return str(self.root / "tables" / name)

    @property
    def records(self) -> str:
        """Both record kinds, partitioned by ``record``."""
        return str(self.root / "tables" / "records")

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    @property
    def images(self) -> Path:
        return self.root / "img"

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"


@dataclass(frozen=True, slots=True)
class JobSettings:
    """Knobs shared by the jobs (defaults suit traces from seconds to days)."""

    #: Width of the lag time series windows; ``None``: about 150 windows over the trace.
    window_ns: int | None = None
    #: Rows of each violations table the report shows.
    shown_violations: int = 200
    #: The report's title.
    title: str = "consistent — staleness report"
