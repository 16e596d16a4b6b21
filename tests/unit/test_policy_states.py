"""Flavour-agnostic state operations, tokens, levels and configuration of the policy."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consistent.errors import InterfaceError, MalformedGtidSet
from consistent.gtid import GtidSet, MariaPosition
from consistent.policy import Level, OnTimeout, PolicyConfig, Tracking
from consistent.policy.states import (
    MAX_TOKEN_LENGTH,
    covers,
    distance,
    empty_state,
    flavor_of,
    format_token,
    merge,
    missing,
    parse_state,
    parse_token,
)

A = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
B = "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb"


def gs(text: str) -> GtidSet:
    return GtidSet.parse(text)


def mp(text: str) -> MariaPosition:
    return MariaPosition.parse(text)


# --- merge / covers / missing / distance ---------------------------------------------------


def test_merge_of_gtid_sets_is_their_union() -> None:
    assert merge(gs(f"{A}:1-3"), gs(f"{A}:5,{B}:1")) == gs(f"{A}:1-3:5,{B}:1")


def test_merge_with_nothing_known_returns_the_other_side() -> None:
    s = gs(f"{A}:1")
    assert merge(None, s) is s
    assert merge(s, None) is s
    assert merge(None, None) is None


def test_merge_of_positions_keeps_the_highest_seq_no_per_domain() -> None:
    assert merge(mp("0-1-10,1-1-3"), mp("0-2-7,1-2-9,2-1-1")) == mp("0-1-10,1-2-9,2-1-1")


def test_merging_flavours_is_refused() -> None:
    with pytest.raises(InterfaceError, match="cannot combine"):
        merge(gs(f"{A}:1"), mp("0-1-1"))


def test_covers_refuses_mixed_flavours_both_ways() -> None:
    with pytest.raises(InterfaceError, match="cannot combine"):
        covers(gs(f"{A}:1"), mp("0-1-1"))
    with pytest.raises(InterfaceError, match="cannot combine"):
        covers(mp("0-1-1"), gs(f"{A}:1"))


@pytest.mark.parametrize(
    ("known", "required", "expected"),
    [
        (f"{A}:1-10", f"{A}:3-4", True),
        (f"{A}:1-10", f"{A}:3-11", False),
        (f"{A}:1-10", f"{A}:1-10,{B}:1", False),
        (f"{A}:1-10,{B}:1-2", f"{B}:2", True),
        ("", "", True),
    ],
)
def test_covers_is_inclusion_for_gtid_sets(known: str, required: str, expected: bool) -> None:
    assert covers(gs(known), gs(required)) is expected


def test_nothing_known_covers_only_the_empty_set() -> None:
    assert covers(None, GtidSet()) is True
    assert covers(None, gs(f"{A}:1")) is False
    assert covers(None, MariaPosition()) is True


@pytest.mark.parametrize(
    ("known", "required", "expected"),
    [
        ("0-1-10", "0-1-10", True),
        ("0-1-10", "0-2-9", True),  # server ids do not matter, seq_no per domain does
        ("0-1-10", "0-1-11", False),
        ("0-1-10", "0-1-5,1-1-1", False),  # a domain the replica never saw
        ("0-1-10,1-1-4", "1-1-4", True),
    ],
)
def test_covers_is_per_domain_seq_no_for_positions(
    known: str, required: str, expected: bool
) -> None:
    assert covers(mp(known), mp(required)) is expected


def test_missing_is_the_set_difference_on_mysql() -> None:
    assert missing(gs(f"{A}:1-10,{B}:1-3"), gs(f"{A}:1-8,{B}:2")) == gs(f"{A}:9-10,{B}:1:3")
    assert missing(gs(f"{A}:1-3"), gs(f"{A}:1-5")) == GtidSet()
    assert missing(gs(f"{A}:1-3"), None) == gs(f"{A}:1-3")


def test_missing_keeps_only_the_domains_not_reached_on_mariadb() -> None:
    assert missing(mp("0-1-10,1-1-5,2-1-7"), mp("0-1-12,1-1-4")) == mp("1-1-5,2-1-7")
    assert missing(mp("0-1-10"), mp("0-1-10")) == MariaPosition()


def test_waiting_for_what_is_missing_is_enough() -> None:
    required = mp("0-1-10,1-1-5,2-1-7")
    known = mp("0-1-12,1-1-4")
    after_wait = merge(known, missing(required, known))
    assert covers(after_wait, required)


def test_distance_counts_transactions_not_known_to_be_applied() -> None:
    assert distance(gs(f"{A}:1-10"), gs(f"{A}:1-7")) == 3
    assert distance(gs(f"{A}:1-10"), None) == 10
    assert distance(mp("0-1-10,1-1-5"), mp("0-1-7")) == 3 + 5
    assert distance(mp("0-1-10"), mp("0-1-11")) == 0


gtid_sets = st.lists(
    st.tuples(st.sampled_from([A, B]), st.integers(1, 40), st.integers(0, 5)), max_size=6
).map(
    lambda items: GtidSet.from_intervals(
        {(u, None): [(s, s + n)] for u, s, n in items} if items else {}
    )
)


@given(gtid_sets, gtid_sets)
def test_property_missing_plus_known_covers_required(required: GtidSet, known: GtidSet) -> None:
    lacking = missing(required, known)
    assert covers(merge(known, lacking), required)
    assert lacking <= required
    assert (not lacking) == covers(known, required)
    assert (distance(required, known) == 0) == covers(known, required)


positions = st.dictionaries(st.integers(0, 3), st.integers(1, 50), max_size=4).map(
    lambda d: MariaPosition.parse(",".join(f"{dom}-1-{seq}" for dom, seq in sorted(d.items())))
)


@given(positions, positions)
def test_property_positions_missing_plus_known_covers_required(
    required: MariaPosition, known: MariaPosition
) -> None:
    lacking = missing(required, known)
    merged = merge(known, lacking)
    assert merged is not None
    assert covers(merged, required)
    assert (not lacking) == covers(known, required)


# --- tokens ---------------------------------------------------------------------------------


def test_an_empty_requirement_has_the_empty_token() -> None:
    assert format_token(GtidSet()) == ""
    assert format_token(MariaPosition()) == ""
    assert format_token(None) == ""


def test_tokens_are_tagged_with_their_flavour_on_one_line() -> None:
    assert format_token(gs(f"{B}:1-3,{A}:7")) == f"mysql:{A}:7,{B}:1-3"
    assert format_token(mp("1-2-5,0-1-9")) == "mariadb:0-1-9,1-2-5"


@pytest.mark.parametrize(
    "token",
    [f"mysql:{A}:1-5:7", f"{A}:1-5:7", f"  MySQL:{A}:1-5:7 ", f"mysql:{A}:1-5:7\n"],
)
def test_mysql_tokens_parse_with_or_without_their_tag(token: str) -> None:
    assert parse_token(token, "mysql") == gs(f"{A}:1-5:7")


@pytest.mark.parametrize("token", ["mariadb:0-1-9,1-2-5", "0-1-9,1-2-5", "MARIADB: 0-1-9,1-2-5"])
def test_mariadb_tokens_parse_with_or_without_their_tag(token: str) -> None:
    assert parse_token(token, "mariadb") == mp("0-1-9,1-2-5")


@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
def test_the_empty_token_requires_nothing_on_either_flavour(flavor: str) -> None:
    assert not parse_token("", flavor)  # type: ignore[arg-type]
    assert not parse_token(f"{flavor}:", flavor)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("token", "flavor"),
    [
        ("mariadb:0-1-9", "mysql"),  # tagged for the other flavour
        (f"mysql:{A}:1", "mariadb"),
        ("0-1-9", "mysql"),  # untagged, but the other flavour's syntax
        (f"{A}:1", "mariadb"),
        ("not a token", "mysql"),
        ("mysql:zzz", "mysql"),
        ("mariadb:0-1", "mariadb"),
    ],
)
def test_malformed_or_foreign_tokens_raise_1772(token: str, flavor: str) -> None:
    with pytest.raises(MalformedGtidSet) as info:
        parse_token(token, flavor)  # type: ignore[arg-type]
    assert info.value.errno == 1772


def test_a_token_that_is_not_text_raises_1772() -> None:
    with pytest.raises(MalformedGtidSet):
        parse_token(b"mysql:" + A.encode(), "mysql")  # type: ignore[arg-type]


@given(gtid_sets)
def test_property_mysql_tokens_round_trip(state: GtidSet) -> None:
    assert parse_token(format_token(state), "mysql") == state


@given(positions)
def test_property_mariadb_tokens_round_trip(state: MariaPosition) -> None:
    assert parse_token(format_token(state), "mariadb") == state


def test_flavour_helpers() -> None:
    assert flavor_of(GtidSet()) == "mysql"
    assert flavor_of(MariaPosition()) == "mariadb"
    assert isinstance(empty_state("mysql"), GtidSet)
    assert isinstance(empty_state("mariadb"), MariaPosition)
    assert parse_state(f"{A}:1-2,\n{B}:3", "mysql") == gs(f"{A}:1-2,{B}:3")
    assert parse_state(" 0-1-4\n", "mariadb") == mp("0-1-4")


# --- levels and configuration ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("eventual", Level.EVENTUAL),
        ("READ_OWN_WRITES", Level.READ_OWN_WRITES),
        ("read-all-writes", Level.READ_ALL_WRITES),
        (" read_latest ", Level.READ_LATEST),
    ],
)
def test_levels_parse_from_text(text: str, level: Level) -> None:
    assert Level.parse(text) is level


def test_an_unknown_level_is_an_interface_error() -> None:
    with pytest.raises(InterfaceError, match="unknown consistency level"):
        Level.parse("strong")


def test_on_timeout_parses_and_rejects() -> None:
    assert OnTimeout.parse("next-replica") is OnTimeout.NEXT_REPLICA
    with pytest.raises(InterfaceError, match="unknown on_timeout"):
        OnTimeout.parse("retry")


def test_config_defaults_follow_the_design() -> None:
    config = PolicyConfig()
    assert config.level is Level.READ_OWN_WRITES
    assert config.wait_timeout == 1.0
    assert config.on_timeout is OnTimeout.PRIMARY
    assert config.max_lag is None


def test_config_coerces_strings() -> None:
    config = PolicyConfig(level="read_latest", on_timeout="error")  # type: ignore[arg-type]
    assert config.level is Level.READ_LATEST
    assert config.on_timeout is OnTimeout.ERROR


@pytest.mark.parametrize("timeout", [0, -1, math.nan, math.inf, True, "1"])
def test_config_rejects_bad_wait_timeouts(timeout: object) -> None:
    with pytest.raises(InterfaceError, match="wait_timeout"):
        PolicyConfig(wait_timeout=timeout)  # type: ignore[arg-type]


@pytest.mark.parametrize("max_lag", [-0.5, math.nan, "2"])
def test_config_rejects_bad_max_lag(max_lag: object) -> None:
    with pytest.raises(InterfaceError, match="max_lag"):
        PolicyConfig(max_lag=max_lag)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("level", "tracking"),
    [
        (Level.EVENTUAL, Tracking.OWN),
        (Level.READ_OWN_WRITES, Tracking.OWN),
        (Level.READ_ALL_WRITES, Tracking.ALL),
        (Level.READ_LATEST, Tracking.OWN),
    ],
)
def test_tracking_follows_the_level(level: Level, tracking: Tracking) -> None:
    assert PolicyConfig(level=level).tracking is tracking


def test_tokens_are_bounded_and_never_fail_otherwise_than_1772() -> None:
    too_long = "mariadb:" + ",".join(f"{d}-1-1" for d in range(MAX_TOKEN_LENGTH // 5))
    with pytest.raises(MalformedGtidSet) as info:
        parse_token(too_long, "mariadb")
    assert info.value.args[0] == 1772
    assert len(info.value.args[1]) < 300  # the message quotes 200 characters at most
    # A number past int()'s digit limit is a malformed token, not a ValueError.
    with pytest.raises(MalformedGtidSet):
        parse_token("mariadb:0-1-" + "9" * 5000, "mariadb")
    assert str(parse_token("mariadb:0-1-5", "mariadb")) == "0-1-5"
