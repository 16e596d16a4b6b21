"""The report page from a small trace set, read back as HTML: what comes first, what the
violations table may hold, how replicas are named, which units and scales the charts use.

The traces are synthetic (:mod:`bench._synthetic`) OTLP-JSON lines whose lag samples name
the replicas ``replica1`` and ``delayed``; every job runs on them, and the page is parsed with
the standard library's HTML parser."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from html.parser import HTMLParser
from types import ModuleType

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)

from analytics import report
from analytics.jobs.run import RunResult, run_all

ADDRESSES = ("10.0.0.11:3306", "10.0.0.12:3306")
NAMES = ("replica1", "delayed")


@dataclass
class Node:
    """A heading, an image, a table (its header and rows) or a ``<details>`` block, in page
    order."""

    kind: str
    text: str = ""
    id: str = ""
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    folded: bool = False


class Page(HTMLParser):
    """The page's outline: headings, images and tables in order (tables inside ``<details>``
    are marked folded)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.nodes: list[Node] = []
        self._details = 0
        self._table: Node | None = None
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._heading: Node | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "details":
            self._details += 1
        elif tag == "h2":
            self._heading = Node("h2", id=attributes.get("id") or "")
            self.nodes.append(self._heading)
        elif tag == "img":
            self.nodes.append(Node("img", text=attributes.get("alt") or ""))
        elif tag == "table":
            self._table = Node("table", folded=self._details > 0)
            self.nodes.append(self._table)
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self._details -= 1
        elif tag == "h2":
            self._heading = None
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            if not self._table.header:
                self._table.header = self._row
            else:
                self._table.rows.append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._heading is not None:
            self._heading.text += data

    def section(self, section_id: str) -> list[Node]:
        """The nodes from heading ``section_id`` to the next heading."""
        start = next(i for i, n in enumerate(self.nodes) if n.kind == "h2" and n.id == section_id)
        end = next(
            (i for i in range(start + 1, len(self.nodes)) if self.nodes[i].kind == "h2"),
            len(self.nodes),
        )
        return self.nodes[start + 1 : end]


@pytest.fixture(scope="module")
def result(
    spark: SparkSession, synthetic: ModuleType, tmp_path_factory: pytest.TempPathFactory
) -> RunResult:
    config = synthetic.SyntheticConfig(
        sessions=50,
        replicas=ADDRESSES,
        replica_names=NAMES,
        # A lag burst over the whole 4 s (lag rising slower than time: applied GTIDs grow).
        burst_period_s=40.0,
        first_hop_peak_ms=400.0,
        second_hop_peak_ms=200.0,
        sample_share=0.01,  # samples 200 ms apart: some reads fall between two of them
        wait_timeout_ms=150.0,  # shorter than the bursts: some waits time out
        known_states=False,  # reads only samples decide: some stay unproven
    )
    lines = synthetic.otlp_lines(synthetic.generate(spark, 4000, config), batch=256).collect()
    traces = tmp_path_factory.mktemp("page-traces") / "traces.jsonl"
    traces.write_text("".join(row["value"] + "\n" for row in lines), encoding="utf-8")
    return run_all(spark, [str(traces)], tmp_path_factory.mktemp("page"))


@pytest.fixture(scope="module")
def page(result: RunResult) -> Page:
    keep = os.environ.get("ANALYTICS_KEEP_REPORT")  # a copy to look at in a browser
    if keep:
        shutil.rmtree(keep, ignore_errors=True)
        shutil.copytree(result.layout.root, keep)
    return Page(result.layout.report.read_text(encoding="utf-8"))


def test_the_traces_hold_what_the_page_must_sort_out(
    spark: SparkSession, result: RunResult
) -> None:
    audit = spark.read.parquet(str(result.layout.root / "tables" / "read_audit"))
    guaranteed = audit.where(F.col("guaranteed"))
    assert guaranteed.where(F.col("status") == "unproven").count() > 0
    # The synthetic routing is approximate: some guaranteed reads come out proven stale.
    assert guaranteed.where(F.col("status") == "stale").count() > 0
    assert guaranteed.where(F.col("status") == "covered").count() > 0
    assert {r["reason"] for r in result.data.pinning} >= {"pinned", "timeout_fallback"}


def test_the_lag_chart_comes_first_and_charts_before_long_tables(page: Page) -> None:
    headings = [n.id for n in page.nodes if n.kind == "h2"]
    assert headings[0] == "lag"
    charts = ["lag", "offload", "waits", "audit", "pinning"]
    assert [h for h in headings if h in charts] == charts
    assert headings.index("pinning") < headings.index("violations") < headings.index("unproven")
    first_image = next(i for i, n in enumerate(page.nodes) if n.kind == "img")
    last_image = max(i for i, n in enumerate(page.nodes) if n.kind == "img")
    # Before the last chart, only short tables: one row per replica or per level.
    for node in page.nodes[:last_image]:
        if node.kind == "table":
            assert len(node.rows) <= len(report.LEVEL_ORDER), node.header
    assert page.nodes[first_image].text.startswith("Replica lag")


def test_the_violations_table_holds_proven_violations_only(
    spark: SparkSession, page: Page, result: RunResult
) -> None:
    audit = spark.read.parquet(str(result.layout.root / "tables" / "read_audit"))
    guaranteed = audit.where(F.col("guaranteed"))
    stale = {
        (report._when(r["start_ns"]), r["session_id"])
        for r in guaranteed.where(F.col("status") == "stale").collect()
    }
    unproven = {
        (report._when(r["start_ns"]), r["session_id"])
        for r in guaranteed.where(F.col("status") == "unproven").collect()
    }
    heading = next(n for n in page.nodes if n.kind == "h2" and n.id == "violations")
    assert heading.text.strip().startswith(f"Violations of the guarantee ({len(stale):,}")
    [table] = [n for n in page.section("violations") if n.kind == "table"]
    assert table.header[:3] == ["read at (UTC)", "level", "session"]
    shown = {(row[0], row[2]) for row in table.rows}
    assert len(table.rows) == min(len(stale), 200)
    assert shown <= stale
    assert not shown & unproven
    assert {row[1] for row in table.rows} <= {"read_own_writes", "read_all_writes", "read_latest"}


def test_unproven_reads_are_folded_with_counts_per_level_and_why(
    page: Page, result: RunResult
) -> None:
    unproven = sum(int(r["unproven"]) for r in result.data.reads if r["level"] != "eventual")
    heading = next(n for n in page.nodes if n.kind == "h2" and n.id == "unproven")
    assert heading.text.strip() == f"Unproven reads of guaranteed levels ({unproven:,})"
    tables = [n for n in page.section("unproven") if n.kind == "table"]
    assert tables
    assert all(t.folded for t in tables)
    counts = tables[0]
    assert counts.header[0] == "why"
    assert counts.header[-1] == "meaning"
    assert set(counts.header[1:-1]) <= set(report.LEVEL_ORDER)
    assert {row[0] for row in counts.rows} <= set(report.UNPROVEN_REASONS)
    total = sum(int(cell.replace(",", "")) for row in counts.rows for cell in row[1:-1])
    assert total == unproven


def test_replicas_are_named_as_the_user_named_them(page: Page, result: RunResult) -> None:
    lag_table = next(n for n in page.section("lag") if n.kind == "table")
    assert lag_table.header[:2] == ["replica", "channel"]
    assert sorted(row[0] for row in lag_table.rows) == sorted(NAMES)
    assert {row[1] for row in lag_table.rows} == {"(default)"}
    text = result.layout.report.read_text(encoding="utf-8")
    assert not [address for address in ADDRESSES if address in text]


def test_the_wait_axis_has_one_unit_and_the_audit_axis_is_linear(result: RunResult) -> None:
    waits = report.waits_figure(result.data)
    assert waits is not None
    labels = [t.get_text() for t in waits.axes[0].get_xticklabels()]
    assert labels
    assert all(label == "<1" or label.replace(",", "").isdigit() for label in labels)
    assert "ms" in waits.axes[0].get_xlabel()
    audit = report.audit_figure(result.data)
    assert audit is not None
    assert audit.axes[0].get_xscale() == "linear"


def test_pinning_shows_pin_reasons_only(result: RunResult) -> None:
    figure = report.pinning_figure(result.data)
    assert figure is not None
    labels = {t.get_text() for t in figure.axes[0].get_yticklabels()}
    pinned = {r["detail"] for r in result.data.pinning if r["reason"] == "pinned"}
    assert labels == pinned
    assert "timeout_fallback" not in labels
