"""The report from plain values (no Spark): headline numbers per level, the page, its plots,
the violations table (empty when the guarantee held) and the terminal summary."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console

from analytics.report import ReportData, headline, render_html, terminal_summary

S = 1_000_000_000
R1, R2 = "10.0.0.1:3306", "10.0.0.2:3306"


def _window(replica: str, second: int, p50: float, p99: float) -> dict[str, object]:
    return {"replica": replica, "channel": "", "window_start_ns": second * S, "samples": 10,
            "lag_p50_ms": p50, "lag_p95_ms": p99, "lag_p99_ms": p99, "lag_max_ms": p99,
            "hop_lag_p50_ms": p50 / 2, "hop_lag_p95_ms": p99 / 2, "hop_lag_p99_ms": p99 / 2,
            "hop_lag_max_ms": p99 / 2}  # fmt: skip


def _cost(level: str, reads: int, replica: int, waited: int, fallbacks: int) -> dict[str, object]:
    return {"level": level, "reads": reads, "replica_reads": replica, "waited": waited,
            "timeouts": fallbacks, "fallbacks": fallbacks, "timeout_errors": 0,
            "wait_p50_ms": 3.0 if waited else None, "wait_p95_ms": None,
            "wait_p99_ms": 40.0 if waited else None, "read_p50_ms": 1.0, "read_p95_ms": 2.0,
            "offload_ratio": replica / reads}  # fmt: skip


def _data(violations: list[dict[str, object]]) -> ReportData:
    return ReportData(
        totals={
            "statements": 500,
            "lag_samples": 40,
            "sessions": 4,
            "first_ns": 0,
            "last_ns": 20 * S,
        },
        lag_summary=[_window(R1, 0, 5.0, 90.0), _window(R2, 0, 8.0, 300.0)],
        lag_windows=[_window(r, s, 5.0 + s, 50.0 + 10 * s) for r in (R1, R2) for s in range(20)],
        window_ns=S,
        cost=[_cost("read_own_writes", 200, 150, 30, 10), _cost("eventual", 100, 100, 0, 0)],
        wait_histogram=[
            {"level": "read_own_writes", "bucket_ms": 2.0, "outcome": "satisfied", "waits": 20},
            {"level": "read_own_writes", "bucket_ms": 32.0, "outcome": "timeout", "waits": 10},
        ],
        reads=[
            {"level": "eventual", "replica_reads": 100, "covered": 60, "stale": 7, "unproven": 33},
            {
                "level": "read_own_writes",
                "replica_reads": 150,
                "covered": 150,
                "stale": 0,
                "unproven": 0,
            },
        ],
        pinning=[{"reason": "pinned", "detail": "temporary_table", "reads": 40, "sessions": 1}],
        violations=violations,
        violation_count=len(violations),
        eventual_stale_count=7,
    )


def test_headline_per_level() -> None:
    numbers = headline(_data([]))
    assert list(numbers["levels"]) == ["eventual", "read_own_writes"]  # weakest first
    assert numbers["levels"]["read_own_writes"] == {
        "reads": 200, "replica_reads": 150, "replica_share": 0.75, "violations": 0,
        "unproven": 0, "waited": 30, "wait_p50_ms": 3.0, "wait_p99_ms": 40.0, "fallbacks": 10,
        "timeouts": 10,
    }  # fmt: skip
    assert numbers["levels"]["eventual"]["violations"] == 7
    assert numbers["offload_ratio"] == 250 / 300
    assert numbers["guarantee_violations"] == 0


def test_the_page_has_its_plots_and_an_empty_violations_table_when_the_guarantee_held() -> None:
    rendered = render_html(_data([]))
    assert set(rendered.images) == {"lag.png", "offload.png", "waits.png", "audit.png",
                                    "pinning.png"}  # fmt: skip
    assert all(png.startswith(b"\x89PNG") for png in rendered.images.values())
    assert rendered.html.count('src="data:image/png;base64,') == 5
    assert "Violations of the guarantee (0)" in rendered.html
    assert 'class="empty"' in rendered.html


def test_violations_are_listed() -> None:
    row = {"start_ns": 3 * S, "status": "stale", "level": "read_own_writes",
           "session_id": "s-42", "replica": R2, "route_reason": "known_covered",
           "source": "3e11fa47-71ca-11e1-9e33-c80aa9429562", "required_high": 9,
           "executed_low": 4, "executed_high": 6}  # fmt: skip
    page = render_html(_data([row])).html
    assert "Violations of the guarantee (1)" in page
    assert "s-42" in page
    assert 'class="empty"' not in page


def test_terminal_summary() -> None:
    console = Console(file=io.StringIO(), width=160, record=True)
    console.print(terminal_summary(_data([])))
    text = console.export_text()
    assert "guarantee violations: 0" in text
    assert "read_own_writes" in text
    assert "83.3 %" in text  # 250 of 300 reads offloaded


def test_unproven_reads_are_folded_apart_and_replicas_shown_by_name() -> None:
    stale = {"start_ns": 3 * S, "status": "stale", "level": "read_own_writes",
             "session_id": "s-42", "replica": R2, "route_reason": "known_covered"}  # fmt: skip
    undecided = {**stale, "status": "unproven", "session_id": "s-43", "why": "no_sample_after"}
    data = replace(
        _data([stale, undecided]),
        unproven=[undecided],
        unproven_reasons=[{"level": "read_own_writes", "why": "no_sample_after", "reads": 3}],
        replica_names={R2: "delayed"},
    )
    page = render_html(data).html
    violations = page[page.index('id="violations"') : page.index('id="unproven"')]
    unproven = page[page.index('id="unproven"') :]
    assert "s-42" in violations
    assert "s-43" not in violations
    assert "<details>" in unproven
    assert "s-43" in unproven
    assert "no_sample_after" in unproven
    assert "delayed" in page
    assert R2 not in page
    assert page.index('id="lag"') < page.index('id="violations"')


def test_a_change_of_primary_is_marked_on_the_lag_chart_and_named() -> None:
    plain = _data([])
    moved = replace(
        plain,
        role_changes=[{"start_ns": 12 * S, "role_previous": R1, "role_primary": R2}],
        replica_names={R2: "replica2"},
    )
    assert headline(moved)["primary_changes"] == 1
    assert headline(plain)["primary_changes"] == 0
    page = render_html(moved).html
    assert "The primary changed (dashed lines)" in page
    assert "→ replica2" in page  # named as the user named it
    assert "The primary changed" not in render_html(plain).html
    # The marker changes the chart.
    assert render_html(moved).images["lag.png"] != render_html(plain).images["lag.png"]
