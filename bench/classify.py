"""Classifications per second: ``consistent.classify`` against ``sqlglot.parse_one``.

Both run over the same statements, the hand-written corpus of
``tests/unit/classify_corpus.tsv``, cycled until a time budget is spent; sqlglot's parse
failures count as attempts (they cost time too).  Usage::

    .venv/bin/python bench/classify.py [--seconds 3] [--json PATH]

A second workload, a typical OLTP mix, shows the common path.  The run is bounded: about
``4.5 * seconds`` plus warm-up (about 15 s by default).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import TypeVar

import sqlglot
from sqlglot.errors import ParseError, TokenError

from consistent.classify import classify

T = TypeVar("T", str, bytes)

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "unit" / "classify_corpus.tsv"


def load_statements(path: Path = CORPUS) -> list[str]:
    """The ``sql`` column of the corpus, with its newline and tab markers decoded."""
    statements = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("//"):
            sql = line.split("\t", 1)[0]
            statements.append(sql.replace("⏎", "\n").replace("⇥", "\t"))
    return statements


def _sqlglot(sql: str) -> object:
    try:
        return sqlglot.parse_one(sql, read="mysql")
    except (ParseError, TokenError):
        return None


def _sqlglot_gave_up(sql: str) -> bool:
    """sqlglot raised, or fell back to an unparsed ``Command``."""
    tree = _sqlglot(sql)
    return tree is None or isinstance(tree, sqlglot.exp.Command)


def measure(fn: Callable[[T], object], statements: Sequence[T], seconds: float) -> float:
    """Calls of ``fn`` per second over ``statements``, cycled for about ``seconds``."""
    for sql in statements:  # warm-up: caches, lazily built tables
        fn(sql)
    done = 0
    started = time.perf_counter()
    deadline = started + seconds
    while True:
        for sql in statements:
            fn(sql)
        done += len(statements)
        now = time.perf_counter()
        if now >= deadline:
            return done / (now - started)


# What an ORM-backed application mostly sends: short reads, DML and transaction control.
OLTP_MIX = (
    "SELECT users.id, users.name, users.email FROM users WHERE users.id = 42",
    "SELECT o.id, o.total, o.status FROM orders AS o WHERE o.user_id = 42 AND o.status IN"
    " ('new', 'paid') ORDER BY o.created_at DESC LIMIT 20",
    "SELECT COUNT(*) AS count_1 FROM orders WHERE orders.user_id = 42",
    "INSERT INTO orders (user_id, total, status, note) VALUES (42, 99.5, 'new', 'it''s a gift')",
    "UPDATE orders SET status = 'paid', updated_at = NOW() WHERE orders.id = 1001",
    "DELETE FROM carts WHERE carts.user_id = 42",
    "BEGIN",
    "COMMIT",
    "SELECT p.id, p.name FROM products AS p JOIN stock AS s ON s.product_id = p.id"
    " WHERE s.quantity > 0 AND p.category_id = 3",
    "SELECT * FROM accounts WHERE id = 7 FOR UPDATE",
)


def _report(label: str, statements: Sequence[str], seconds: float) -> dict[str, float]:
    """Print and return both rates over ``statements`` and their ratio (ours / sqlglot)."""
    ours = measure(classify, statements, seconds)
    theirs = measure(_sqlglot, statements, seconds)
    print(f"{label}:")
    print(f"  consistent.classify       {ours:12,.0f} /s  {1e6 / ours:9.2f} us each")
    print(f"  sqlglot.parse_one(mysql)  {theirs:12,.0f} /s  {1e6 / theirs:9.2f} us each")
    print(f"  ratio: classify is {ours / theirs:.1f}x faster")
    return {
        "statements": len(statements),
        "ours_per_s": ours,
        "sqlglot_per_s": theirs,
        "ratio": ours / theirs,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time budget per measure")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    # sqlglot logs each statement it falls back to parsing as a generic Command.
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    statements = load_statements()
    unparsed = sum(_sqlglot_gave_up(sql) for sql in statements)
    print(
        f"corpus: {len(statements)} statements, {unparsed} of which sqlglot cannot parse"
        " or leaves as a generic Command"
    )
    corpus = _report("corpus (tests/unit/classify_corpus.tsv)", statements, args.seconds)
    oltp = _report(f"OLTP mix ({len(OLTP_MIX)} typical statements)", OLTP_MIX, args.seconds)
    encoded = [sql.encode() for sql in statements]
    as_bytes = measure(classify, encoded, args.seconds / 2)
    print(f"corpus as bytes: consistent.classify {as_bytes:,.0f} /s  {1e6 / as_bytes:.2f} us each")
    if args.json:
        payload = {
            "python": platform.python_version(),
            "sqlglot": metadata.version("sqlglot"),
            "seconds": args.seconds,
            "corpus": {**corpus, "sqlglot_unparsed": unparsed},
            "oltp_mix": oltp,
            "corpus_bytes_per_s": as_bytes,
        }
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(payload, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
