"""The hand-written corpus: every statement of classify_corpus.tsv against its expectations.

The expectations were written by hand from the MySQL/MariaDB manuals and DESIGN step 1 (the
file's header explains the columns); they are not produced by the classifier.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from consistent.classify import Classification, StatementKind, classify

CORPUS = Path(__file__).with_name("classify_corpus.tsv")
_FLAGS = ("multi", "read_only", "chain", "follows", "hint_error")


@dataclass(frozen=True)
class Case:
    line: int
    sql: str
    kind: str
    primary: bool
    reason: str | None
    pin: str | None
    extras: dict[str, str]


def _decode(sql: str) -> str:
    return sql.replace("⏎", "\n").replace("⇥", "\t")


def load_corpus() -> list[Case]:
    cases = []
    for number, raw in enumerate(CORPUS.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip() or raw.startswith("//"):
            continue
        fields = raw.split("\t")
        sql, kind, primary, reason, pin = fields[:5]
        extras: dict[str, str] = {}
        for item in fields[5].split(";") if len(fields) > 5 and fields[5] else []:
            key, _, value = item.partition("=")
            extras[key] = value
        cases.append(
            Case(
                line=number,
                sql=_decode(sql),
                kind=kind,
                primary=primary == "1",
                reason=None if reason == "-" else reason,
                pin=None if pin == "-" else pin,
                extras=extras,
            )
        )
    return cases


CASES = load_corpus()


def _observed(result: Classification, case: Case) -> dict[str, object]:
    """The fields the case talks about, read from the classifier's answer."""
    seen: dict[str, object] = {
        "kind": result.kind.name,
        "must_use_primary": result.must_use_primary,
        "primary_reason": result.primary_reason,
        "pins_session": result.pins_session,
        "multi": result.is_multi_statement,
        "read_only": result.read_only,
        "chain": result.chain,
        "follows": result.follows_previous,
        "hint_error": result.hint_error is not None,
        "sets_autocommit": result.sets_autocommit,
        "unpins_session": result.unpins_session,
        "schema": result.schema,
    }
    extras = case.extras
    if "commit" in extras:
        seen["implicit_commit"] = result.implicit_commit
    if "first" in extras:
        seen["first_keyword"] = result.first_keyword
    if "hint" in extras or "level" in extras:
        seen["hint_target"] = result.hint.target if result.hint else None
        seen["hint_level"] = result.hint.level if result.hint else None
    return seen


def _expected(case: Case) -> dict[str, object]:
    extras = case.extras
    autocommit = extras.get("autocommit")
    want: dict[str, object] = {
        "kind": case.kind,
        "must_use_primary": case.primary,
        "primary_reason": case.reason,
        "pins_session": case.pin,
        **{flag: flag in extras for flag in _FLAGS},
        "sets_autocommit": None if autocommit is None else autocommit == "1",
        "unpins_session": extras.get("unpin"),
        "schema": extras.get("schema"),
    }
    if "commit" in extras:
        want["implicit_commit"] = extras["commit"] == "1"
    if "first" in extras:
        want["first_keyword"] = extras["first"]
    if "hint" in extras or "level" in extras:
        want["hint_target"] = extras.get("hint")
        want["hint_level"] = extras.get("level")
    return want


def test_corpus_is_large_and_covers_every_kind() -> None:
    assert len(CASES) >= 300
    assert {case.kind for case in CASES} == {kind.name for kind in StatementKind}
    assert len({case.sql for case in CASES}) == len(CASES), "duplicate statements"


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"L{c.line}")
def test_corpus_statement(case: Case) -> None:
    assert _observed(classify(case.sql), case) == _expected(case), case.sql


@pytest.mark.parametrize("case", CASES[::7], ids=lambda c: f"L{c.line}")
def test_bytes_input_classifies_like_text(case: Case) -> None:
    assert classify(case.sql.encode()) == classify(case.sql)
