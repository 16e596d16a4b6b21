"""Throughput of ``consistent.gtid.GtidSet`` beside ``pymysqlreplication.gtid.GtidSet``.

Run: ``.venv/bin/python bench/gtid.py [--json PATH] [--budget SECONDS]``.

Sets have 1, 26 and 1,000 UUIDs with three intervals each (deterministic pseudo-random sizes
and gaps).  Each row times the same work on both libraries and checks first that both give the
same answer:

==========  =====================================  =============================================
row         ours                                   pymysqlreplication (mysql-replication)
==========  =====================================  =============================================
parse       ``GtidSet.parse(text)``                ``GtidSet(text)``
format      ``s.to_text()`` (not ``str(s)``,       ``str(s)``
            which caches its text)
union       ``a | b``                              ``a + b`` (``GtidSet.__add__``)
subset      ``small <= big``                       ``small in big`` (``GtidSet.__contains__``)
add         ``big.add(gtid)``                      ``big + gtid`` (``GtidSet.__add__`` of a Gtid)
contains    ``gtid in big``                        ``gtid in big`` (``GtidSet.__contains__``)
==========  =====================================  =============================================

Two properties of the other library shape the inputs.  Its ``Gtid.__add__`` raises on
overlapping intervals, so the union operands are disjoint: ``b`` continues every UUID of ``a``
after a gap and brings 10% new UUIDs.  Its set-in-set ``__contains__`` tests each per-UUID
``Gtid`` with ``list.__contains__``, i.e. *equality* with one of the other set's, not interval
containment; so ``small`` is every other UUID of ``big`` with identical intervals, where both
answers are True and both libraries must look at every UUID of ``small``.

Each figure is the best of three batches sized to share a time budget; the ratio is ours /
theirs (higher is better for us).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
import uuid as uuid_module
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any

from pymysqlreplication.gtid import Gtid as TheirGtid
from pymysqlreplication.gtid import GtidSet as TheirSet

from consistent.gtid import Gtid, GtidSet

SIZES = (1, 26, 1000)
INTERVALS_PER_UUID = 3


@dataclass(frozen=True)
class Row:
    op: str
    uuids: int
    ours_ops: float
    theirs_ops: float

    @property
    def ratio(self) -> float:
        return self.ours_ops / self.theirs_ops


def make_uuids(rng: random.Random, n: int) -> list[str]:
    return [str(uuid_module.UUID(int=rng.getrandbits(128))) for _ in range(n)]


def intervals(rng: random.Random, start: int) -> list[tuple[int, int]]:
    out = []
    for _ in range(INTERVALS_PER_UUID):
        end = start + rng.randint(0, 5000)
        out.append((start, end))
        start = end + rng.randint(2, 50)
    return out


def text_of(spec: dict[str, list[tuple[int, int]]]) -> str:
    return str(GtidSet.from_intervals({(u, None): iv for u, iv in spec.items()}))


@dataclass(frozen=True)
class Inputs:
    a: str
    b: str
    big: str
    small: str
    gtid: str


def make_inputs(n: int) -> Inputs:
    rng = random.Random(n)
    uuids = make_uuids(rng, n)
    a = {u: intervals(rng, rng.randint(1, 100)) for u in uuids}
    b = {u: intervals(rng, a[u][-1][1] + rng.randint(2, 50)) for u in uuids}
    for u in make_uuids(rng, max(1, n // 10)):
        b[u] = intervals(rng, 1)
    small = {u: a[u] for u in uuids[::2]}
    middle = uuids[len(uuids) // 2]
    gap_gno = a[middle][0][1] + 1  # just after the first interval: not in the set
    return Inputs(text_of(a), text_of(b), text_of(a), text_of(small), f"{middle}:{gap_gno}")


def measure(fn: Callable[[], object], budget: float) -> float:
    """Operations per second: best of three batches sized to fill ``budget`` together."""
    fn()
    calls = 1
    while True:
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - started
        if elapsed >= budget / 6 or calls >= 1 << 22:
            break
        calls *= 2 if elapsed == 0 else max(2, min(100, int(budget / 6 / elapsed) + 1))
    best = elapsed
    for _ in range(2):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - started)
    return calls / best


def check(ours: Any, theirs: Any, what: str) -> None:
    if ours != theirs:
        raise SystemExit(f"results differ for {what}: {ours!r} != {theirs!r}")


def bench_size(n: int, budget: float) -> list[Row]:
    data = make_inputs(n)
    a, b = GtidSet.parse(data.a), GtidSet.parse(data.b)
    big, small = GtidSet.parse(data.big), GtidSet.parse(data.small)
    ta, tb = TheirSet(data.a), TheirSet(data.b)
    tbig, tsmall = TheirSet(data.big), TheirSet(data.small)
    gtid, tgtid = Gtid.parse(data.gtid), TheirGtid(data.gtid)

    check(GtidSet.parse(str(ta)), a, "parse")
    check(a.to_text(), str(ta), "format")
    check(a | b, GtidSet.parse(str(ta + tb)), "union")
    check(small <= big, tsmall in tbig, "subset")
    check(big.add(gtid), GtidSet.parse(str(tbig + tgtid)), "add")
    check(gtid in big, tgtid in tbig, "contains")

    cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("parse", lambda: GtidSet.parse(data.a), lambda: TheirSet(data.a)),
        ("format", a.to_text, lambda: str(ta)),
        ("union", lambda: a | b, lambda: ta + tb),
        ("subset", lambda: small <= big, lambda: tsmall in tbig),
        ("add", lambda: big.add(gtid), lambda: tbig + tgtid),
        ("contains", lambda: gtid in big, lambda: tgtid in tbig),
    ]
    return [
        Row(op, n, measure(ours, budget), measure(theirs, budget)) for op, ours, theirs in cases
    ]


def human(rate: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if rate >= scale:
            return f"{rate / scale:8.2f}{unit}"
    return f"{rate:8.1f} "


def print_table(rows: list[Row]) -> None:
    header = ("operation", "uuids", "ours ops/s", "theirs ops/s", "ours/theirs")
    print("{:<10} {:>6} {:>12} {:>13} {:>12}".format(*header))
    print("-" * 57)
    for row in rows:
        print(
            f"{row.op:<10} {row.uuids:>6} {human(row.ours_ops):>12} "
            f"{human(row.theirs_ops):>13} {row.ratio:>11.1f}x"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument(
        "--budget", type=float, default=0.4, help="seconds per measurement (default 0.4)"
    )
    args = parser.parse_args(argv)
    theirs_version = metadata.version("mysql-replication")
    print(
        f"consistent.gtid vs pymysqlreplication {theirs_version} "
        f"(Python {platform.python_version()}, {INTERVALS_PER_UUID} intervals per UUID)\n"
    )
    rows: list[Row] = []
    for n in SIZES:
        rows.extend(bench_size(n, args.budget))
    order = {
        op: i for i, op in enumerate(["parse", "format", "union", "subset", "add", "contains"])
    }
    rows.sort(key=lambda r: (order[r.op], r.uuids))
    print_table(rows)
    if args.json:
        payload = {
            "python": platform.python_version(),
            "mysql_replication": theirs_version,
            "rows": [{**asdict(r), "ratio": r.ratio} for r in rows],
        }
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(payload, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
