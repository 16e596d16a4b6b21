"""The digest rule: GTID sets in full up to the configured size, then a digest and a count."""

from __future__ import annotations

import hashlib

import pytest

from consistent.gtid import GtidSet, MariaPosition
from consistent.telemetry.gtidattr import gtid_attribute, put_gtid_attributes
from consistent.trace import AttributeValue

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "c0ffee00-0000-4000-8000-000000000001"


def test_a_set_within_the_limit_is_recorded_as_single_line_text() -> None:
    state = GtidSet.parse(f"{U2}:1-5,\n{U1}:1-10:12")
    text = f"{U1}:1-10:12,{U2}:1-5"  # mysqld's order: by UUID; one line
    recorded = gtid_attribute(state, max_chars=len(text))
    assert (recorded.text, recorded.digest, recorded.count) == (text, None, 16)


def test_one_character_over_the_limit_gives_the_digest_of_that_text() -> None:
    state = GtidSet.parse(f"{U1}:1-10:12")
    text = f"{U1}:1-10:12"
    recorded = gtid_attribute(state, max_chars=len(text) - 1)
    assert recorded.text is None
    assert recorded.digest == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    assert recorded.count == 11


def test_equal_sets_get_equal_digests_and_different_sets_different_ones() -> None:
    a = gtid_attribute(GtidSet.parse(f"{U1}:1-3:5"), 1)
    b = gtid_attribute(GtidSet.parse(f"{U1}:5,{U1}:1-3"), 1)
    c = gtid_attribute(GtidSet.parse(f"{U1}:1-3:6"), 1)
    assert a.digest == b.digest != c.digest


def test_a_mariadb_position_counts_domains() -> None:
    recorded = gtid_attribute(MariaPosition.parse("1-2-5,0-1-1000"), max_chars=100)
    assert (recorded.text, recorded.count) == ("0-1-1000,1-2-5", 2)


@pytest.mark.parametrize(
    ("limit", "names"), [(100, {"x", "x.count"}), (3, {"x.digest", "x.count"})]
)
def test_put_adds_exactly_the_attributes_of_the_rule(limit: int, names: set[str]) -> None:
    attributes: dict[str, AttributeValue] = {}
    put_gtid_attributes(attributes, "x", GtidSet.parse(f"{U1}:7"), limit)
    assert set(attributes) == names
    put_gtid_attributes(attributes, "y", None, limit)
    assert set(attributes) == names


def test_the_empty_set_is_empty_text_and_zero() -> None:
    attributes: dict[str, AttributeValue] = {}
    put_gtid_attributes(attributes, "x", GtidSet(), 10)
    assert attributes == {"x": "", "x.count": 0}


def test_beyond_the_limit_a_set_keeps_its_last_gtid_of_each_source_when_that_fits() -> None:
    gaps = ":".join(str(n) for n in range(1, 200, 2))  # 1:3:5:…:199, a hundred intervals
    state = GtidSet.parse(f"{U2}:1-4:9,{U1}:{gaps}")
    high = f"{U1}:199,{U2}:9"
    recorded = gtid_attribute(state, max_chars=len(high))
    assert recorded.text is None
    assert recorded.digest is not None
    assert recorded.high == high
    assert GtidSet.parse(high) <= state  # a subset: every GTID it names is in the set
    attributes: dict[str, AttributeValue] = {}
    put_gtid_attributes(attributes, "x", state, len(high))
    assert attributes["x.high"] == high
    assert gtid_attribute(state, max_chars=len(high) - 1).high is None  # does not fit either


def test_a_mariadb_position_has_no_high_beyond_the_limit() -> None:
    recorded = gtid_attribute(MariaPosition.parse("1-2-5,0-1-1000"), max_chars=3)
    assert (recorded.text, recorded.high) == (None, None)
    assert recorded.digest is not None
