"""Step functions and the audit's look-ups over record batches, on arrays written by hand
(every expected value worked out from the events listed in each test)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from analytics.steps import (
    MISSING,
    Direction,
    Int64s,
    ReadLookups,
    SessionSteps,
    build,
    build_sessions,
    look_up_batch,
    lookup_fields,
    lookup_inputs,
)

pa = pytest.importorskip("pyarrow")

M = MISSING


def _a(*values: int) -> Int64s:
    return np.array(values, dtype=np.int64)


# Events (key, value), unsorted, with a tie at key 20, a missing value and a missing key.
KEYS = _a(30, 10, 20, 20, 40, M)
VALUES = _a(2, 5, 3, 7, M, 9)
QUERIES = _a(5, 10, 15, 20, 25, 30, 45, M)


@pytest.mark.parametrize(
    ("direction", "inclusive", "expected"),
    [
        # Largest value at or before: 10→5, 20→max(5,3,7)=7, 30→7 (2 is lower), 40 has none.
        ("past", True, _a(M, 5, 5, 7, 7, 7, 7, M)),
        # Strictly before: at 10 nothing yet, at 20 only 10's 5, at 30 still 7.
        ("past", False, _a(M, M, 5, 5, 7, 7, 7, M)),
        # Smallest value at or after: from 5 and 10: min(5,3,7,2)=2; after 30 none left.
        ("future", True, _a(2, 2, 2, 2, 2, 2, M, M)),
        # Strictly after: 2 (at 30) for every query below 30; nothing after 30 (40 has no
        # value).
        ("future", False, _a(2, 2, 2, 2, 2, M, M, M)),
    ],
)
def test_step_functions(direction: Direction, inclusive: bool, expected: Int64s) -> None:
    step = build(KEYS, VALUES, direction, inclusive=inclusive)
    assert step(QUERIES).tolist() == expected.tolist()


def test_future_minimum_follows_the_order() -> None:
    # Events 10→8, 20→4, 30→6: from 15 on the smallest is 4, from 25 on it is 6.
    step = build(_a(30, 10, 20), _a(6, 8, 4), "future")
    assert step(_a(5, 15, 20, 25, 30, 31)).tolist() == [4, 4, 4, 6, 6, M]


def test_points_that_change_nothing_are_left_out() -> None:
    # Past: 10→5, 20→5 (no change), 30→7; future: 10→2, 20→2 (2 from 20 on as from 10 on).
    past = build(_a(10, 20, 30), _a(5, 5, 7), "past")
    assert past.keys.tolist() == [10, 30]
    assert past(_a(15, 25, 35)).tolist() == [5, 5, 7]
    future = build(_a(10, 20, 30), _a(3, 2, 6), "future")
    assert future.keys.tolist() == [20, 30]
    assert future(_a(5, 15, 25, 31)).tolist() == [2, 2, 6, M]


def test_no_events() -> None:
    assert build(_a(), _a(), "past")(_a(1, 2)).tolist() == [M, M]
    assert build(_a(5), _a(M), "future")(_a(1)).tolist() == [M]


def _statements(*rows: tuple[str | None, int | None, int | None, str | None]) -> object:
    names = ("session_id", "start_ns", "end_ns", "span_id")
    types = (pa.string(), pa.int64(), pa.int64(), pa.string())
    columns = [pa.array([r[k] for r in rows], type=t) for k, t in enumerate(types)]
    return pa.RecordBatch.from_arrays(columns, names=list(names))


def _sessions(
    writes: list[tuple[str | None, int | None, int | None, str | None]],
    produced: list[Int64s],
) -> SessionSteps:
    batch = _statements(*writes)
    return build_sessions(*batch.columns, produced)  # type: ignore[attr-defined]


def test_what_a_session_had_produced_before_a_statement() -> None:
    """Spark's session order: start, end, span id, each ascending with nulls first; a
    statement counts only what sorts strictly before it (not itself, not an equal key); the
    null session is a session."""
    writes = [
        ("A", 10, 20, "b"),  # w1: GNO 3 (source 1: 5)
        ("A", 10, 20, "d"),  # w2: 9, same times as w1, after it by span id
        ("A", 10, 15, "z"),  # w3: 1, same start, ends first
        ("A", 30, 40, "a"),  # w4: 4 (source 1: 6), later but lower: 9 stays the highest
        ("A", None, 5, "x"),  # w5: 2, no start: first
        (None, 50, 60, "c"),  # w6: 7, in the null session
        ("B", 10, 20, "c"),  # w7: 11
        ("B", 1, 2, "a"),  # w8: nothing produced (left out)
    ]
    steps = _sessions(writes, [_a(3, 9, 1, 4, 2, 7, 11, M), _a(5, M, M, 6, M, M, M, M)])
    # A in order: w5 (2), w3 (1), w1 (3), w2 (9), w4 (4); running highest 2, 2, 3, 9, 9.
    queries = _statements(
        ("A", 10, 20, "c"),  # after w5, w3, w1: 3 (source 1: 5)
        ("A", 10, 20, "b"),  # w1's own key: after w5, w3 only: 2
        ("A", 10, 20, None),  # a null span id first: 2
        ("A", 10, 15, "zz"),  # after w3 ("z" < "zz"): 2
        ("A", 10, 20, "e"),  # after w2: 9
        ("A", None, None, None),  # before w5 (its end, 5, is known): nothing
        ("A", None, 7, "a"),  # after w5: 2
        ("A", 31, 0, "a"),  # after all of A: 9 (source 1: 6)
        (None, 55, 0, "a"),  # the null session, after w6: 7
        (None, 50, 60, "c"),  # w6's own key: nothing
        ("C", 100, 100, "a"),  # a session that wrote nothing
        ("B", 10, 20, "c"),  # w7's own key: nothing
        ("B", 10, 20, "ca"),  # after w7: 11
    )
    found = steps(queries)
    assert found[0].tolist() == [3, 2, 2, 2, 9, M, 2, 9, 7, M, M, M, 11]
    assert found[1].tolist() == [5, M, M, M, 5, M, M, 6, M, M, M, M, M]


def test_sessions_agree_with_a_sorted_scan() -> None:
    """Many ties and nulls: each look-up equals the highest value among the writes of the
    same session whose (start, end, span id) sorts before the statement's, nulls first."""
    rng = np.random.default_rng(7)

    def pick(options: list[Any], n: int) -> list[Any]:
        return [options[k] for k in rng.integers(0, len(options), n)]

    def rows(n: int) -> list[tuple[Any, Any, Any, Any]]:
        return list(
            zip(
                pick(["a", "b", None], n),
                pick([None, 1, 2, 3], n),
                pick([None, 1, 2], n),
                pick([None, "a", "b", "ab", "é"], n),
                strict=True,
            )
        )

    def key(row: tuple[Any, Any, Any, Any]) -> tuple[Any, ...]:
        _, start, end, span = row
        return (start is not None, start or 0, end is not None, end or 0, span is not None,
                span or "")  # fmt: skip

    writes, queries = rows(300), rows(500)
    values = rng.integers(1, 1000, len(writes)).astype(np.int64)
    values[rng.random(len(writes)) < 0.2] = M
    found = _sessions(writes, [values])(_statements(*queries))[0]
    expected = [
        max(
            (
                int(v)
                for w, v in zip(writes, values, strict=True)
                if w[0] == q[0] and key(w) < key(q) and v != M
            ),
            default=M,
        )
        for q in queries
    ]
    assert found.tolist() == expected


def test_look_up_batch() -> None:
    """Two replicas sampled, one not; source 0 only.  Samples of A: [100, 110] applied 3,
    [200, 210] applied 6; of B: [150, 160] applied 4.  The primary: 5 at 90, 8 at 190.
    Commits by GNO: 4 at 60, 5 at 90, 7 at 150, 8 at 190.  The router knew A had 5 at 105
    (r1: true, A showed 6 from 200), and claimed it had 9 at 150 (r2: false, A showed 6 at
    200).  Session S wrote GNO 2 in [50, 60] and 8 in [180, 190]; r3's level required 3."""
    lookups = ReadLookups(
        earlier=build_sessions(
            pa.array(["S", "S"]),
            pa.array([50, 180]),
            pa.array([60, 190]),
            pa.array(["w1", "w2"]),
            [_a(2, 8)],
        ),
        evidence={
            "A": (build(_a(110, 210), _a(3, 6), "past"),),
            "B": (build(_a(160), _a(4), "past"),),
        },
        observation={
            "A": (build(_a(100, 200), _a(3, 6), "future"),),
            "B": (build(_a(150), _a(4), "future"),),
        },
        primary=(build(_a(90, 190), _a(5, 8), "past"),),
        oldest=(build(_a(4, 5, 7, 8), _a(60, 90, 150, 190), "future", inclusive=False),),
    )
    batch = pa.RecordBatch.from_pydict(
        {
            "span_id": ["r1", "r2", "r3", "r4", "r5"],
            "session_id": ["S", "S", "S", "T", None],
            # A, A, B, C (never sampled), none.
            "replica_index": [0, 0, 1, -1, None],
            "start_ns": [120, 215, 170, 300, 120],
            "end_ns": [130, 220, 175, 310, 130],
            "required0": [None, None, 3, None, None],
            "wait0": [None, None, 7, None, None],
            "known0": [5, 9, None, None, None],
            "known_at_ns": [105, 150, None, None, None],
        },
        schema=pa.schema(
            [
                ("span_id", pa.string()),
                ("session_id", pa.string()),
                ("replica_index", pa.int64()),
                ("start_ns", pa.int64()),
                ("end_ns", pa.int64()),
                ("required0", pa.int64()),
                ("wait0", pa.int64()),
                ("known0", pa.int64()),
                ("known_at_ns", pa.int64()),
            ]
        ),
    )
    assert sorted(batch.schema.names) == sorted(lookup_inputs(1))
    out = look_up_batch(batch, lookups)
    assert lookup_fields(1) == ["req0", "low0", "high0", "primary0", "oldest0"]
    assert [f.name for f in out.type] == lookup_fields(1)
    rows = out.to_pylist()
    # S had written 2 before r1 and r3 (whose level required 3), 8 before r2; T wrote
    #     nothing, r5 has no session.
    # r1 on A at 120: A had 3 by 110, but the router knew 5 from 105 (no later sample says
    #     otherwise); 6 from 200 on; primary 5; oldest above 5: GNO 7 at 150.
    # r2 on A at 215: 6 by 210 (the claim of 9 is contradicted by the sample at 200); no
    #     sample after 220; primary 8; above 6: GNO 7 at 150.
    # r3 on B at 170: 4 by 160, but its own wait proved 7; nothing after 175; primary 5
    #     (8 came at 190); above 7: GNO 8 at 190.
    # r4 on C (never sampled), r5 with no replica: nothing known but the primary's state.
    expected = [
        {"req0": 2, "low0": 5, "high0": 6, "primary0": 5, "oldest0": 150},
        {"req0": 8, "low0": 6, "high0": None, "primary0": 8, "oldest0": 150},
        {"req0": 3, "low0": 7, "high0": None, "primary0": 5, "oldest0": 190},
        {"req0": None, "low0": None, "high0": None, "primary0": 8, "oldest0": None},
        {"req0": None, "low0": None, "high0": None, "primary0": 5, "oldest0": None},
    ]
    assert rows == expected
