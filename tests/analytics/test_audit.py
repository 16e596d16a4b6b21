"""The audit and staleness at read time on a trace written by hand, whose truth is known by
construction: an eventual session reads its own write from a lagging replica (a stale read
that really happened), a read_own_writes session is routed by a (deliberately wrong) policy to
a replica that has not applied its write (a violation of the guarantee the audit must find),
a wait that proves coverage, a required set recorded only as a digest, a replica nobody
sampled.  Every expected number below was worked out by hand from the rows.

Times are in milliseconds (``MS``).
"""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.types import LongType, StringType
from pyspark.testing import assertDataFrameEqual

from analytics import audit, metrics, schema

from .conftest import frame, struct

MS = 1_000_000
U = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
R1, R2, R3 = "10.0.0.1:3306", "10.0.0.2:3306", "10.0.0.3:3306"


def _statement(
    span: str, session: str, start: int, end: int, **columns: object
) -> dict[str, object]:
    return {"span_id": span, "session_id": session, "start_ns": start * MS, "end_ns": end * MS,
            "status_code": 0, **columns}  # fmt: skip


def _read(  # noqa: PLR0917 (one row of the trace per line)
          span: str, session: str, start: int, end: int, level: str, replica: str, reason: str,
          **columns: object) -> dict[str, object]:  # fmt: skip
    return _statement(span, session, start, end, statement_kind="read", level=level,
                      route_role="replica", route_target=replica, route_reason=reason,
                      **columns)  # fmt: skip


def _write(  # noqa: PLR0917
    span: str, session: str, start: int, end: int, level: str, gno: int
) -> dict[str, object]:
    return _statement(span, session, start, end, statement_kind="write", level=level,
                      route_role="primary", route_target="primary", route_reason="write",
                      gtid_produced=f"{U}:{gno}", gtid_produced_count=1)  # fmt: skip


STATEMENTS = [
    # E (eventual): writes GNO 5, reads it back from R1 too early (r1), and later (r2).
    _write("w1", "E", 100, 110, "eventual", 5),
    _read("r1", "E", 120, 125, "eventual", R1, "eventual"),
    _read("r2", "E", 300, 305, "eventual", R1, "eventual"),
    # O (read_own_writes): writes GNO 7; r3 waits on R2 for it; r4 is sent to R1 without a
    # wait although R1 is behind: the policy's mistake.
    _write("w2", "O", 200, 210, "read_own_writes", 7),
    _read("r3", "O", 220, 260, "read_own_writes", R2, "waited", gtid_required=f"{U}:7",
          wait_target=R2, wait_outcome="satisfied", wait_set=f"{U}:7", wait_count=1),
    _read("r4", "O", 230, 235, "read_own_writes", R1, "known_covered", gtid_required=f"{U}:7"),
    # N (read_all_writes): the required set was too long and is recorded as a digest only.
    _read("r5", "N", 400, 405, "read_all_writes", R2, "known_covered",
          gtid_required_digest="sha256:00", gtid_required_count=7),
    # M (eventual): a replica nobody sampled, a session that wrote nothing.
    _read("r6", "M", 500, 505, "eventual", R3, "eventual"),
    # Not audited: a read on the primary, a failed replica read.
    _statement("p1", "M", 510, 511, statement_kind="read", route_role="primary",
               route_target="primary", route_reason="pinned"),
    _read("f1", "M", 520, 521, "eventual", R1, "eventual", error_type="OperationalError",
          status_code=2),
]  # fmt: skip


def _sample(span: str, replica: str, start: int, end: int, gno: int | None) -> dict[str, object]:
    return {"span_id": span, "lag_replica": replica, "start_ns": start * MS, "end_ns": end * MS,
            "lag_reachable": gno is not None,
            "lag_last_applied_gtid": None if gno is None else f"{U}:{gno}"}  # fmt: skip


LAG = [
    _sample("s1", R1, 105, 115, 3),
    _sample("s2", R1, 130, 140, 4),
    _sample("s3", R1, 250, 260, 6),
    _sample("s4", R1, 280, 290, 6),
    _sample("s5", R2, 205, 215, 4),
    _sample("s6", R2, 300, 301, None),  # unreachable: says nothing
]


def _statements(spark: SparkSession, rows: list[dict[str, object]] = STATEMENTS) -> DataFrame:
    return frame(spark, schema.STATEMENT, rows)


def _lag(spark: SparkSession) -> DataFrame:
    return frame(spark, schema.LAG_SAMPLE, LAG)


def test_gtid_sources(spark: SparkSession) -> None:
    mariadb = [_write("m", "S", 1, 2, "eventual", 0) | {"gtid_produced": "0-1-4,2-1-9"}]
    lag = frame(spark, schema.LAG_SAMPLE, [{"span_id": "x", "lag_gtid_slave_pos": "3-1-1"}])
    found = audit.gtid_sources(_statements(spark, STATEMENTS + mariadb), lag)
    assertDataFrameEqual(found, [Row(source=s) for s in (U, "0", "2", "3")])


def _same_lookups(a: audit.ReadLookups, b: audit.ReadLookups) -> bool:
    steps = [*a.primary, *a.oldest, *[x for v in a.evidence.values() for x in v]]
    others = [*b.primary, *b.oldest, *[x for v in b.evidence.values() for x in v]]
    return (
        a.replicas() == b.replicas()
        and len(steps) == len(others)
        and all(
            np.array_equal(x.keys, y.keys) and np.array_equal(x.values, y.values)
            for x, y in zip(steps, others, strict=True)
        )
        and a.earlier.segments == b.earlier.segments
        and all(np.array_equal(x, y) for x, y in zip(a.earlier.highs, b.earlier.highs, strict=True))
    )


V = "4f0c9d1a-71ca-11e1-9e33-c80aa9429562"


@pytest.mark.parametrize(
    ("case", "sources"),
    [
        ("sampled", [U]),
        ("two primaries", [U, V]),
        ("a domain no sample names", ["0", "2", U]),
        ("a tag", [U, f"{U}:tg"]),
        ("upper case", [U]),
        ("no samples", [U]),
    ],
)
def test_sources_and_lookups_equal_those_collected_apart(
    spark: SparkSession, case: str, sources: list[str]
) -> None:
    """The sources the samples name are a guess that the statements' pass checks: whatever
    the sets name beyond it, the result is what :func:`gtid_sources` and :func:`lookups`
    give."""
    produced = {
        "two primaries": f"{V}:1-3,{U}:1-9",
        "a domain no sample names": "0-1-4,2-1-9",
        "a tag": f"{U}:1-9:tg:1-2",
    }
    rows = [*STATEMENTS]
    if case in produced:
        rows.append(_write("m", "S", 1, 2, "eventual", 0) | {"gtid_produced": produced[case]})
    if case == "upper case":  # a read's set only, of a sampled source written otherwise
        rows.append(_read("ru", "O", 400, 405, "read_own_writes", R1, "known_covered",
                          gtid_required=f"{U.upper()}:1-7"))  # fmt: skip
    samples = [*LAG]
    if case == "two primaries":
        samples.append(_sample("v", R1, 300, 301, None) | {"lag_reachable": True,
                       "lag_last_applied_gtid": f"{V}:2"})  # fmt: skip
    lag = frame(spark, schema.LAG_SAMPLE, samples if case != "no samples" else [])
    statements = _statements(spark, rows)
    expected = sorted(r["source"] for r in audit.gtid_sources(statements, lag).collect())
    assert expected == sources
    found_sources, found = audit.sources_and_lookups(statements, lag)
    assert found_sources == sources
    assert _same_lookups(found, audit.lookups(statements, lag, sources))


def test_replica_reads_carry_their_levels_requirement_and_their_own_wait(
    spark: SparkSession,
) -> None:
    reads = audit.replica_reads(_statements(spark), [U])
    out = struct(("span_id", StringType()), ("required0", LongType()), ("wait0", LongType()))
    # r3: O's level required 7, and its wait on R2 (its own replica) proved 7; r4: required
    # 7 (r3's wait was on another read); the others required nothing (what their sessions
    # wrote is looked up afterwards).
    expected = frame(
        spark,
        out,
        [
            {"span_id": "r1"},
            {"span_id": "r2"},
            {"span_id": "r3", "required0": 7, "wait0": 7},
            {"span_id": "r4", "required0": 7},
            {"span_id": "r5"},
            {"span_id": "r6"},
        ],
    )
    assertDataFrameEqual(reads.select("span_id", "required0", "wait0"), expected)
    digests = {r["span_id"] for r in reads.where("digest_only").collect()}
    assert digests == {"r5"}


def test_the_requirement_includes_the_sessions_earlier_writes(
    found: audit.ReadAnalysis,
) -> None:
    """r1, r2 (eventual: no level requirement) need what E wrote before them, 5; r3 and r4
    what O wrote, 7; r5 and r6: their sessions wrote nothing."""
    rows = found.reads.select("span_id", "required_high", "sources_checked").collect()
    assert {r["span_id"]: r["required_high"] for r in rows} == {
        "r1": 5, "r2": 5, "r3": 7, "r4": 7, "r5": None, "r6": None,
    }  # fmt: skip


def test_replica_states_leave_out_unreachable_samples(spark: SparkSession) -> None:
    states = audit.replica_states(_lag(spark), [U, "other"])
    out = struct(
        ("replica", StringType()), ("start_ns", LongType()), ("end_ns", LongType()),
        ("applied0", LongType()), ("applied1", LongType()),
    )  # fmt: skip
    rows = [(R1, 105, 115, 3), (R1, 130, 140, 4), (R1, 250, 260, 6), (R1, 280, 290, 6),
            (R2, 205, 215, 4)]  # fmt: skip
    expected = frame(
        spark,
        out,
        [
            {"replica": r, "start_ns": a * MS, "end_ns": b * MS, "applied0": g}
            for r, a, b, g in rows
        ],
    )
    assertDataFrameEqual(states, expected)


def test_primary_state_and_commits(spark: SparkSession) -> None:
    rows = [
        *STATEMENTS,
        _read("x", "L", 600, 601, "read_latest", R1, "waited", gtid_required=f"{U}:1-9"),
        _read("y", "O", 700, 701, "read_own_writes", R1, "waited", gtid_required=f"{U}:1-8"),
    ]
    statements = _statements(spark, rows)
    primary = audit.primary_state(statements, _lag(spark), [U])
    # The writes (5 at 110, 7 at 210) and read_latest's required set (9 at 601); a
    # read_own_writes set says nothing about the primary beyond the session's writes.
    expected = frame(
        spark,
        struct(("at_ns", LongType()), ("primary0", LongType())),
        [{"at_ns": 110 * MS, "primary0": 5}, {"at_ns": 210 * MS, "primary0": 7},
         {"at_ns": 601 * MS, "primary0": 9}],
    )  # fmt: skip
    assertDataFrameEqual(primary, expected)
    expected_commits = frame(
        spark,
        struct(("at_ns", LongType()), ("source", StringType()), ("high", LongType())),
        [{"at_ns": 110 * MS, "source": U, "high": 5}, {"at_ns": 210 * MS, "source": U, "high": 7}],
    )
    assertDataFrameEqual(audit.commits(statements, [U]), expected_commits)


@pytest.fixture(scope="module")
def found(spark: SparkSession) -> audit.ReadAnalysis:
    return audit.analyze_reads(_statements(spark), _lag(spark), [U])


def _audit_row(  # noqa: PLR0917 (one expected row per line)
               span: str, session: str, level: str, replica: str, reason: str, start: int,
               end: int, status: str, checked: int, behind: int | None,
               behind_ms: float | None, required: int | None, low: int | None,
               high: int | None) -> dict[str, object]:  # fmt: skip
    return {"span_id": span, "session_id": session, "level": level, "replica": replica,
            "route_reason": reason, "start_ns": start * MS, "end_ns": end * MS,
            "guaranteed": level != "eventual", "status": status, "sources_checked": checked,
            "behind_transactions": behind, "behind_ms": behind_ms, "source": U,
            "required_high": required, "executed_low": low,
            "executed_high": high}  # fmt: skip


# Worked out by hand (see each comment); the primary had 5 from 110 ms, 7 from 210 ms.
EXPECTED_READS = [
    # r1: needs 5 (w1 ended at 110); R1 had 3 by 115 (s1) and still only 4 at 130 (s2,
    # after the read ended): stale.  5 - 3 = 2 behind; the oldest missing, GNO 5, committed
    # at 110: 10 ms before the read.
    _audit_row("r1", "E", "eventual", R1, "eventual", 120, 125, "stale", 1, 2, 10.0, 5, 3, 4),
    # r2: needs 5; R1 had 6 by 290 (s4): covered; no sample after it.  7 - 6 = 1 behind,
    # GNO 7 committed at 210: 90 ms.
    _audit_row("r2", "E", "eventual", R1, "eventual", 300, 305, "covered", 1, 1, 90.0, 5, 6,
               None),
    # r3: its own wait proved 7 on R2 (the sample said 4): covered, nothing behind.
    _audit_row("r3", "O", "read_own_writes", R2, "waited", 220, 260, "covered", 1, 0, 0.0, 7,
               7, None),
    # r4: needs 7; R1 had 4 by 140 (s2) and only 6 at 250 (s3): stale, a violation of the
    # guarantee.  7 - 4 = 3 behind; the oldest missing is GNO 5, committed at 110.
    _audit_row("r4", "O", "read_own_writes", R1, "known_covered", 230, 235, "stale", 1, 3,
               120.0, 7, 4, 6),
    # r5: the requirement is a digest: unproven.  R2 had 4 (s5; s6 did not answer):
    # 7 - 4 = 3 behind, GNO 5 missing since 110: 290 ms.
    _audit_row("r5", "N", "read_all_writes", R2, "known_covered", 400, 405, "unproven", 0, 3,
               290.0, None, 4, None),
    # r6: nothing required, nothing known about R3.
    _audit_row("r6", "M", "eventual", R3, "eventual", 500, 505, "covered", 0, None, None,
               None, None, None),
]  # fmt: skip


def test_every_replica_read_gets_a_verdict_and_its_staleness(
    spark: SparkSession, found: audit.ReadAnalysis
) -> None:
    assertDataFrameEqual(found.reads, frame(spark, audit.READ_AUDIT, EXPECTED_READS))


def test_violations_are_the_reads_not_shown_covered(
    spark: SparkSession, found: audit.ReadAnalysis
) -> None:
    expected = [row for row in EXPECTED_READS if row["span_id"] in ("r1", "r4", "r5")]
    assertDataFrameEqual(found.violations, frame(spark, audit.VIOLATIONS, expected))


def test_without_the_policy_mistake_the_guarantee_holds(spark: SparkSession) -> None:
    """The same trace with r4 sent to the primary: no guaranteed read is stale any more."""
    fixed = [
        {**row, "route_role": "primary", "route_target": "primary", "route_reason": "write"}
        if row["span_id"] == "r4"
        else row
        for row in STATEMENTS
    ]
    result = audit.analyze_reads(_statements(spark, fixed), _lag(spark), [U])
    stale = result.reads.where("status = 'stale'").select("span_id", "guaranteed")
    assertDataFrameEqual(stale, [Row(span_id="r1", guaranteed=False)])


def test_read_summary_per_level(spark: SparkSession, found: audit.ReadAnalysis) -> None:
    summary = metrics.read_summary(found.reads).select(
        "level", "replica_reads", "covered", "stale", "unproven", "behind_max_ms",
        "behind_transactions_max",
    )  # fmt: skip
    assertDataFrameEqual(
        summary,
        [
            Row(level="eventual", replica_reads=3, covered=2, stale=1, unproven=0,
                behind_max_ms=90.0, behind_transactions_max=2),
            Row(level="read_own_writes", replica_reads=2, covered=1, stale=1, unproven=0,
                behind_max_ms=120.0, behind_transactions_max=3),
            Row(level="read_all_writes", replica_reads=1, covered=0, stale=0, unproven=1,
                behind_max_ms=290.0, behind_transactions_max=3),
        ],
    )  # fmt: skip


def test_mariadb_positions(spark: SparkSession) -> None:
    """MariaDB: ``@@gtid_slave_pos`` is the evidence, per domain; 41 < 42 after the read;
    the primary's ``@@gtid_binlog_pos`` says 42."""
    rows = [
        _write("w", "S", 100, 110, "read_own_writes", 0) | {"gtid_produced": "0-1-42"},
        _read("r", "S", 120, 125, "read_own_writes", R1, "known_covered",
              gtid_required="0-1-42"),
    ]  # fmt: skip
    lag = frame(
        spark,
        schema.LAG_SAMPLE,
        [
            {
                "span_id": "a",
                "lag_replica": R1,
                "start_ns": 112 * MS,
                "end_ns": 113 * MS,
                "lag_gtid_slave_pos": "0-1-40",
                "lag_primary_gtid_binlog_pos": "0-1-42",
            },
            {
                "span_id": "b",
                "lag_replica": R1,
                "start_ns": 130 * MS,
                "end_ns": 131 * MS,
                "lag_gtid_slave_pos": "0-1-41",
            },
        ],
    )
    statements = _statements(spark, rows)
    sources = [r["source"] for r in audit.gtid_sources(statements, lag).collect()]
    assert sources == ["0"]
    result = audit.analyze_reads(statements, lag, sources)
    found = result.reads.select(
        "status", "behind_transactions", "behind_ms", "required_high", "executed_low",
        "executed_high",
    )  # fmt: skip
    assertDataFrameEqual(
        found,
        [Row(status="stale", behind_transactions=2, behind_ms=10.0, required_high=42,
             executed_low=40, executed_high=41)],
    )  # fmt: skip


KNOWN = f"{U}:1-7,{V}:1-3"


def _known(  # noqa: PLR0917 (one row of the trace per line)
           span: str, start: int, end: int, replica: str, known_at: int | None,
           known: str = KNOWN, reason: str = "known_covered",
           **columns: object) -> dict[str, object]:  # fmt: skip
    """A read of session K (``known_covered`` unless ``reason`` says otherwise) whose span
    records what the router knew of its replica (``known``), learnt at ``known_at`` ms."""
    return _read(span, "K", start, end, "read_own_writes", replica, reason, gtid_required=KNOWN,
                 replica_known_executed=known, replica_known_source="tracked",
                 replica_known_at_ns=None if known_at is None else known_at * MS,
                 **columns)  # fmt: skip


# K writes U:7 and V:3, then reads.  R1 was sampled once, at 3, long before; R2 shows 5 after
# l1; R3 shows 5 between what l2's router claimed to know and l2 (and nothing after l2).
EVIDENCE = [
    _write("kw1", "K", 200, 210, "read_own_writes", 7),
    _write("kw2", "K", 212, 215, "read_own_writes", 0) | {"gtid_produced": f"{V}:3"},
    # Learnt at 220, before the read at 230: proof.
    _known("k1", 230, 235, R1, 220),
    # Learnt at the very start of the read, or after it: no proof.
    _known("k2", 240, 245, R1, 240),
    _known("k3", 250, 255, R1, 260),
    # Known from before, but of the replica its last wait ran on, not of R1: no proof.
    _known("k4", 262, 265, R1, 221, wait_target=R2, wait_outcome="timeout", wait_count=1),
    # Waited for V:3 only; U:1-7 was known since 490: the two together prove it.
    _known("k5", 500, 510, R1, 490, known=f"{U}:1-7", reason="waited", wait_target=R1,
           wait_outcome="satisfied", wait_set=f"{V}:3", wait_count=1),
    # Lies: R2 had 5 after l1 ran (stale whatever l1's router claimed), and R3 had only 5 when
    # sampled after l2's router claimed to know 7 (the claim is false: no proof).
    _known("l1", 300, 305, R2, 290),
    _known("l2", 400, 405, R3, 350),
    # The required set was too long to record, but its last GTID per source was recorded.
    _known("k6", 520, 525, R1, 515) | {"gtid_required": None, "gtid_required_digest": "sha256:01",
                                       "gtid_required_high": f"{U}:7,{V}:3"},
]  # fmt: skip

EVIDENCE_LAG = [
    _sample("e1", R1, 105, 115, 3),
    _sample("e2", R2, 310, 312, 5),
    _sample("e3", R3, 360, 365, 5),
]


def test_what_the_router_knew_proves_a_read_only_when_learnt_before_it(
    spark: SparkSession,
) -> None:
    """The router's known state is proof of a read only when its span says it was learnt
    before the read began, about the replica the read ran on, and no sample contradicts it;
    a lying record never hides a stale read."""
    result = audit.analyze_reads(
        _statements(spark, EVIDENCE), frame(spark, schema.LAG_SAMPLE, EVIDENCE_LAG), [U, V]
    )
    found = result.reads.select("span_id", "status", "source", "executed_low", "executed_high")
    assertDataFrameEqual(
        found,
        [
            Row(span_id="k1", status="covered", source=U, executed_low=7, executed_high=None),
            Row(span_id="k2", status="unproven", source=U, executed_low=3, executed_high=None),
            Row(span_id="k3", status="unproven", source=U, executed_low=3, executed_high=None),
            Row(span_id="k4", status="unproven", source=U, executed_low=3, executed_high=None),
            Row(span_id="k5", status="covered", source=U, executed_low=7, executed_high=None),
            Row(span_id="l1", status="stale", source=U, executed_low=None, executed_high=5),
            Row(span_id="l2", status="unproven", source=U, executed_low=5, executed_high=None),
            Row(span_id="k6", status="covered", source=U, executed_low=7, executed_high=None),
        ],
    )


def test_a_planted_stale_read_is_found_whatever_its_span_claims(spark: SparkSession) -> None:
    """The policy's mistake (r4, stale) with a span that claims R1 was known to have 7 since
    before the read: the samples around r4 still show it stale."""
    lying = [
        row | {"replica_known_executed": f"{U}:1-7", "replica_known_at_ns": 225 * MS,
               "replica_known_source": "wait"}
        if row["span_id"] == "r4"
        else row
        for row in STATEMENTS
    ]  # fmt: skip
    result = audit.analyze_reads(_statements(spark, lying), _lag(spark), [U])
    stale = result.reads.where("status = 'stale'").select("span_id", "guaranteed")
    assertDataFrameEqual(
        stale, [Row(span_id="r1", guaranteed=False), Row(span_id="r4", guaranteed=True)]
    )
