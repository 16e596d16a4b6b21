"""The headline table from the analysis' rows and the clients' counts."""

from __future__ import annotations

from rich.console import Console

from consistent.demo.headline import (
    HeadlineRow,
    build_headline,
    failures,
    ground_truth_table,
    headline_table,
)
from consistent.demo.workload import LEVELS, Totals

COST = [
    {
        "level": "read_own_writes",
        "reads": 200,
        "replica_reads": 150,
        "waited": 40,
        "fallbacks": 7,
        "wait_p50_ms": 12.5,
        "wait_p99_ms": 480.0,
    },
    {
        "level": "eventual",
        "reads": 400,
        "replica_reads": 400,
        "waited": 0,
        "fallbacks": 0,
        "wait_p50_ms": None,
        "wait_p99_ms": None,
    },
    {"level": "none", "reads": 9, "replica_reads": 0},
]
READS = [
    {"level": "eventual", "replica_reads": 400, "covered": 100, "stale": 250, "unproven": 50},
    {"level": "read_own_writes", "replica_reads": 150, "covered": 150, "stale": 0, "unproven": 0},
]
TRUTH = {
    "eventual": Totals(sessions=2, writes=200, reads=400, replica_reads=400, stale=260),
    "read_own_writes": Totals(sessions=2, writes=100, reads=200, replica_reads=150),
}


def _row(rows: list[HeadlineRow], level: str) -> HeadlineRow:
    return next(r for r in rows if r.level == level)


def test_one_row_per_level_in_order() -> None:
    rows = build_headline(COST, READS, TRUTH)
    assert [r.level for r in rows] == list(LEVELS)


def test_rows_carry_the_analysis_and_the_ground_truth() -> None:
    rows = build_headline(COST, READS, TRUTH)
    ryw = _row(rows, "read_own_writes")
    assert ryw.reads == 200
    assert ryw.replica_share == 150 / 200
    assert (ryw.wait_p50_ms, ryw.wait_p99_ms, ryw.fallbacks) == (12.5, 480.0, 7)
    assert (ryw.audit_stale, ryw.client_stale, ryw.client_reads) == (0, 0, 200)
    eventual = _row(rows, "eventual")
    assert (eventual.audit_stale, eventual.audit_unproven) == (250, 50)
    assert eventual.client_stale == 260
    assert eventual.wait_p50_ms is None


def test_a_level_without_data_shows_nothing_rather_than_zero_share() -> None:
    latest = _row(build_headline(COST, READS, TRUTH), "read_latest")
    assert latest.reads == 0
    assert latest.replica_share is None
    assert latest.client_reads == 0


def test_eventual_staleness_is_not_a_failure() -> None:
    assert failures(build_headline(COST, READS, TRUTH)) == []


def test_a_guaranteed_level_fails_on_the_audit_or_on_the_clients() -> None:
    by_audit = [*READS, {"level": "read_all_writes", "stale": 2}]
    lines = failures(build_headline(COST, by_audit, TRUTH))
    assert lines == ["read_all_writes: the audit found 2 stale replica reads"]
    by_clients = {**TRUTH, "read_latest": Totals(sessions=1, reads=5, stale=1)}
    lines = failures(build_headline(COST, READS, by_clients))
    assert lines == ["read_latest: clients read 1 values older than their write"]


def test_the_tables_render_every_level() -> None:
    console = Console(width=200, record=True)
    console.print(headline_table(build_headline(COST, READS, TRUTH)))
    console.print(ground_truth_table(TRUTH, "clients"))
    text = console.export_text()
    for level in LEVELS:
        assert level in text
    assert "75.0 %" in text  # read_own_writes: 150 of 200 reads on replicas
    assert "480.0 ms" in text
    assert "260 / 400" in text
