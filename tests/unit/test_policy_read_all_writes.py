"""``read_all_writes``: every write the process had acknowledged before a read began, and
everything the session already saw, on both flavours, with no round trip to the primary while
the session keeps to one replica, and one when it must move to another — driven without any
server, the way the DB-API wrapper and the proxy drive the policy."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from consistent.classify import classify
from consistent.errors import MalformedGtidSet
from consistent.gtid import GtidSet, GtidState, MariaPosition
from consistent.policy import (
    PRIMARY,
    AcknowledgedWrites,
    Action,
    Decision,
    Level,
    PolicyConfig,
    Reason,
    ReplicaKnowledge,
    RequiredSources,
    SessionPolicy,
    Tracking,
    WaitOutcome,
    format_token,
    process_acknowledged,
)
from consistent.policy.acknowledged import TEXT_BATCH
from consistent.policy.states import FlavorName, covers, merge
from consistent.protocol.lenenc import pack_lenenc_bytes
from consistent.protocol.session_state import (
    Gtids,
    Schema,
    SystemVariable,
    build_session_state,
)

A = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
R1 = "10.0.0.2:3306"
R2 = "10.0.0.3:3306"


def gs(text: str) -> GtidSet:
    return GtidSet.parse(text)


def mp(text: str) -> MariaPosition:
    return MariaPosition.parse(text)


def session(
    *,
    flavor: FlavorName = "mariadb",
    level: str = "read_all_writes",
    replicas: Sequence[str] = (R1, R2),
    knowledge: ReplicaKnowledge | None = None,
    acknowledged: AcknowledgedWrites | None = None,
    on_timeout: str = "primary",
) -> SessionPolicy:
    return SessionPolicy(
        replicas=replicas,
        knowledge=knowledge if knowledge is not None else ReplicaKnowledge(),
        flavor=flavor,
        config=PolicyConfig(level=Level(level), on_timeout=on_timeout),  # type: ignore[arg-type]
        acknowledged=acknowledged,
    )


def route(
    policy: SessionPolicy,
    sql: str,
    reached: Callable[[Decision], WaitOutcome] | WaitOutcome = WaitOutcome.REACHED,
    primary: GtidState | None = None,
) -> list[Decision]:
    """Every decision for ``sql``, waits answered by ``reached``, a fetch of the primary's
    state by ``primary`` (none expected without one), success reported."""
    steps = [policy.route(classify(sql), sql)]
    while steps[-1].action is not Action.EXECUTE:
        d = steps[-1]
        if d.action is Action.FETCH_PRIMARY_STATE and primary is not None:
            steps.append(policy.on_primary_state(d, primary))
            continue
        assert d.action is Action.WAIT, d
        outcome = reached(d) if callable(reached) else reached
        steps.append(policy.on_wait(d, outcome, duration=0.01))
    policy.on_success(steps[-1])
    return steps


def write(policy: SessionPolicy, reported: GtidState) -> None:
    sql = "INSERT INTO t VALUES (1)"
    [d] = route(policy, sql)
    assert d.target == PRIMARY
    policy.observe_gtids(PRIMARY, reported)


FLAVORS: list[tuple[FlavorName, Callable[[int], GtidState]]] = [
    ("mysql", lambda n: gs(f"{A}:1-{n}")),
    ("mariadb", lambda n: mp(f"0-1-{n}")),
]


# --- part one: what the process had acknowledged -------------------------------------------------


@pytest.mark.parametrize(("flavor", "state"), FLAVORS, ids=[f for f, _ in FLAVORS])
def test_a_session_that_only_reads_waits_for_what_another_session_had_acknowledged(
    flavor: FlavorName, state: Callable[[int], GtidState]
) -> None:
    knowledge, shared = ReplicaKnowledge(), AcknowledgedWrites()
    writer = session(
        flavor=flavor, level="read_own_writes", knowledge=knowledge, acknowledged=shared
    )
    reader = session(flavor=flavor, knowledge=knowledge, acknowledged=shared)
    write(writer, state(7))
    steps = route(reader, "SELECT v FROM t")
    assert [s.action for s in steps] == [Action.WAIT, Action.EXECUTE]  # no fetch, one wait
    assert steps[0].wait_set == state(7)
    assert steps[-1].reason is Reason.WAITED
    assert steps[-1].required == state(7)
    assert reader.token == format_token(state(7))


@pytest.mark.parametrize(("flavor", "state"), FLAVORS, ids=[f for f, _ in FLAVORS])
def test_without_a_shared_state_the_other_sessions_write_is_not_required(
    flavor: FlavorName, state: Callable[[int], GtidState]
) -> None:
    """The control: the requirement above comes from the shared acknowledged state."""
    writer = session(flavor=flavor, level="read_own_writes")
    reader = session(flavor=flavor)
    write(writer, state(7))
    [d] = route(reader, "SELECT v FROM t")
    assert d.reason is Reason.NOTHING_REQUIRED


@pytest.mark.parametrize(("flavor", "state"), FLAVORS, ids=[f for f, _ in FLAVORS])
def test_read_all_writes_does_not_fetch_the_primary_state_while_it_keeps_to_a_replica(
    flavor: FlavorName, state: Callable[[int], GtidState]
) -> None:
    policy = session(flavor=flavor, level="read_own_writes")
    policy.level = Level.READ_ALL_WRITES
    write(policy, state(3))
    targets = set()
    for _ in range(4):
        steps = route(policy, "SELECT 1")
        assert Action.FETCH_PRIMARY_STATE not in {s.action for s in steps}
        targets.add(steps[-1].target)
    assert len(targets) == 1  # the replica the session last read from, every time
    # read_latest still reads the primary's state per read.
    policy.level = Level.READ_LATEST
    first = policy.route(classify("SELECT 1"), "SELECT 1")
    assert first.action is Action.FETCH_PRIMARY_STATE


def test_the_tracker_is_all_gtids_on_mysql_only_at_read_all_writes() -> None:
    assert session(flavor="mysql").tracking is Tracking.ALL
    assert session(flavor="mysql", level="read_own_writes").tracking is Tracking.OWN


def test_the_acknowledged_state_is_taken_when_the_read_is_routed() -> None:
    """A write acknowledged while a read waits is not that read's due, but the next one's."""
    shared = AcknowledgedWrites()
    writer = session(level="read_own_writes", acknowledged=shared)
    reader = session(acknowledged=shared)
    write(writer, mp("0-1-5"))
    wait = reader.route(classify("SELECT 1"), "SELECT 1")
    assert wait.wait_set == mp("0-1-5")
    write(writer, mp("0-1-6"))
    done = reader.on_wait(wait, WaitOutcome.REACHED, duration=0.01)
    assert done.required == mp("0-1-5")
    reader.on_success(done)
    nxt = route(reader, "SELECT 1")
    assert nxt[0].wait_set == mp("0-1-6")


def test_gtids_acknowledged_out_of_order_never_lower_the_state() -> None:
    shared = AcknowledgedWrites()
    shared.add(mp("0-1-10,1-2-3"))
    shared.add(mp("0-1-9"))  # a slower session's earlier commit, reported later
    shared.note("1-2-2", "mariadb")
    assert shared.state() == mp("0-1-10,1-2-3")
    mysql = AcknowledgedWrites()
    mysql.add(gs(f"{A}:5"))
    mysql.note(f"{A}:3", "mysql")
    mysql.add(gs(f"{A}:1"))
    assert mysql.state() == gs(f"{A}:1:3:5")


def test_texts_are_parsed_when_read_or_in_batches() -> None:
    shared = AcknowledgedWrites()
    assert shared.state() is None
    for n in range(1, TEXT_BATCH):
        shared.note(f"{A}:{n}", "mysql")
    assert shared._texts  # nothing parsed yet
    shared.note(f"{A}:{TEXT_BATCH}", "mysql")
    assert not shared._texts  # a full batch is parsed at once
    assert shared.state() == gs(f"{A}:1-{TEXT_BATCH}")
    batch = AcknowledgedWrites()
    batch.note(f"{A}:1", "mysql")
    batch.note("not a gtid", "mysql")
    batch.note(f"{A}:2", "mysql")
    assert batch.state() == gs(f"{A}:1-2")  # a bad text does not lose the others


def test_mariadb_gtids_keep_one_per_domain_until_read() -> None:
    shared = AcknowledgedWrites()
    for n in range(1, 3 * TEXT_BATCH):
        shared.note(f"0-1-{n}", "mariadb")
        shared.note(f"5-2-{n // 2}", "mariadb")
    assert len(shared._tops) == 2  # the highest per domain waits, nothing else
    assert not shared._texts
    assert shared.state() == mp(f"0-1-{3 * TEXT_BATCH - 1},5-2-{(3 * TEXT_BATCH - 1) // 2}")
    many = AcknowledgedWrites()
    for domain in range(TEXT_BATCH):
        many.note(f"{domain}-1-1", "mariadb")
    assert not many._tops  # as many domains as a batch: parsed at once
    assert many.state() == MariaPosition.parse(",".join(f"{d}-1-1" for d in range(TEXT_BATCH)))


def test_mariadb_gtids_noted_out_of_order_keep_the_highest_by_number() -> None:
    shared = AcknowledgedWrites()
    for text in ("0-1-10", "0-1-9", "0-1-100", "0-1-99", "1-7-5", "1-3-5", "1-9-4"):
        shared.note(text, "mariadb")
    # 100 > 99 as numbers (not as text); a tie on seq_no goes to the higher server_id
    assert shared.state() == mp("0-1-100,1-7-5")
    shared.note("0-2-100", "mariadb")
    shared.note("0-1-50", "mariadb")
    assert shared.state() == mp("0-2-100,1-7-5")


def _mariadb_tail(gtid: str) -> bytes:
    """An OK packet's tail as MariaDB sends it after a write: ``last_gtid`` changed."""
    state = build_session_state([SystemVariable("last_gtid", gtid)])
    return pack_lenenc_bytes(b"") + pack_lenenc_bytes(state)


def _mysql_tail(text: str) -> bytes:
    return pack_lenenc_bytes(b"") + pack_lenenc_bytes(build_session_state([Gtids(text)]))


def test_ok_tails_are_decoded_when_read_or_in_batches() -> None:
    shared = AcknowledgedWrites()
    for n in range(1, TEXT_BATCH):
        shared.note_tail(_mysql_tail(f"{A}:{n}"), "mysql")
    assert shared._tails  # nothing decoded yet
    assert shared._state is None
    assert shared.state() == gs(f"{A}:1-{TEXT_BATCH - 1}")  # a read decodes them all
    assert not shared._tails
    for n in range(TEXT_BATCH, 2 * TEXT_BATCH):
        shared.note_tail(_mysql_tail(f"{A}:{n}"), "mysql")
    assert not shared._tails  # a full batch is decoded at once
    assert shared._state == gs(f"{A}:1-{2 * TEXT_BATCH - 1}")


def test_ok_tails_keep_the_highest_mariadb_gtid_and_skip_what_does_not_decode() -> None:
    shared = AcknowledgedWrites()
    shared.note("0-1-7", "mariadb")
    for tail in (
        _mariadb_tail("0-1-9"),
        _mariadb_tail("0-1-8"),  # lower, arrived later: the merge keeps 9
        b"\x05ab",  # info runs past the end: malformed, skipped
        pack_lenenc_bytes(b"") + pack_lenenc_bytes(build_session_state([Schema("db")])),
        _mariadb_tail("3-2-1"),
    ):
        shared.note_tail(tail, "mariadb")
    assert shared.state() == mp("0-1-9,3-2-1")
    shared.note_tail(_mariadb_tail("0-1-10"), "mariadb")
    shared.forget()
    assert shared.state() is None  # forgotten, undecoded tails included


def test_mariadb_texts_of_another_shape_go_through_the_parser() -> None:
    shared = AcknowledgedWrites()
    shared.note("0-1-5,1-1-7", "mariadb")  # several domains: a valid position
    shared.note("0-1-x", "mariadb")  # not a GTID: dropped, the others kept
    shared.note(f"0-1-{2**64}", "mariadb")  # seq_no out of range: rejected, as the parser does
    shared.note(f"{2**32}-1-1", "mariadb")
    shared.note("0-1-\N{SUPERSCRIPT TWO}", "mariadb")  # a digit, but not an ASCII one
    shared.note("2-1-3", "mariadb")
    assert shared.state() == mp("0-1-5,1-1-7,2-1-3")


maria_texts = st.lists(
    st.builds(
        "{}-{}-{}".format,
        st.integers(0, 3),
        st.integers(0, 3) | st.just(2**32 - 1),
        st.integers(0, 40) | st.just(2**64 - 1),
    )
    | st.sampled_from(["0-1-x", "", f"0-1-{2**64}", "1-2-3,2-2-2", " 0-1-7", "0-01-007"]),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(maria_texts, st.integers(1, 30))
def test_noting_mariadb_texts_gives_the_merge_of_those_that_parse(
    texts: list[str], read_every: int
) -> None:
    """What :meth:`AcknowledgedWrites.note` keeps per domain is what merging the parsed texts
    gives, whenever the state is read in between."""
    shared = AcknowledgedWrites()
    expected: GtidState | None = None
    for i, text in enumerate(texts, 1):
        shared.note(text, "mariadb")
        with contextlib.suppress(MalformedGtidSet):  # a text that does not parse is dropped
            expected = merge(expected, mp(text))
        if i % read_every == 0:
            assert shared.state() == expected
    assert shared.state() == expected


def test_the_state_is_safe_to_share_between_threads() -> None:
    shared = AcknowledgedWrites()

    def noting(first: int) -> None:
        for n in range(first, 4000, 4):
            shared.note(f"{A}:{n + 1}", "mysql")
            if n % 97 == 0:
                shared.state()

    threads = [threading.Thread(target=noting, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert shared.state() == gs(f"{A}:1-4000")


def test_forget_drops_the_state() -> None:
    shared = AcknowledgedWrites()
    shared.add(mp("0-1-4"))
    shared.note("0-1-5", "mariadb")
    shared.forget()
    assert shared.state() is None


def test_the_process_state_is_one_per_primary() -> None:
    assert process_acknowledged("db1:3306") is process_acknowledged("db1:3306")
    assert process_acknowledged("db1:3306") is not process_acknowledged("db2:3306")


def test_every_primary_ok_feeds_the_shared_state_unless_the_driver_did() -> None:
    shared = AcknowledgedWrites()
    policy = session(level="eventual", acknowledged=shared)
    policy.observe_gtids(PRIMARY, mp("0-1-3"))
    assert shared.state() == mp("0-1-3")
    policy.observe_gtids(PRIMARY, mp("0-1-4"), acknowledge=False)
    assert shared.state() == mp("0-1-3")
    assert policy.token == "mariadb:0-1-4"
    policy.observe_gtids(R1, mp("0-1-9"))  # a replica's state is not an acknowledgement
    assert shared.state() == mp("0-1-3")


# --- part two: reads never go backwards ----------------------------------------------------------


def test_the_next_read_requires_what_the_replica_was_known_to_have() -> None:
    knowledge = ReplicaKnowledge()
    knowledge.record_executed(R1, mp("0-1-50"))
    knowledge.record_executed(R2, mp("0-1-20"))
    policy = session(knowledge=knowledge)
    [first] = route(policy, "SELECT 1")
    assert (first.target, first.reason) == (R1, Reason.NOTHING_REQUIRED)
    assert first.known == mp("0-1-50")
    assert policy.seen == mp("0-1-50")
    assert policy.token == "mariadb:0-1-50"


def test_the_session_keeps_reading_from_the_replica_it_last_read_from() -> None:
    knowledge = ReplicaKnowledge()
    policy = session(knowledge=knowledge)
    first = route(policy, "SELECT 1")[-1].target
    other = R2 if first == R1 else R1
    for _ in range(5):
        # The other replica is known to be further ahead, and was picked less recently: a
        # session at read_own_writes would go there.
        knowledge.record_executed(other, mp("0-1-90"))
        [d] = route(policy, "SELECT 1")
        assert d.target == first
    spread = session(knowledge=knowledge, level="read_own_writes")
    assert {route(spread, "SELECT 1")[-1].target for _ in range(4)} == {R1, R2}


def test_the_session_moves_when_another_replica_is_clearly_fresher() -> None:
    knowledge = ReplicaKnowledge()
    policy = session(knowledge=knowledge)
    first = route(policy, "SELECT 1")[-1].target
    other = R2 if first == R1 else R1
    knowledge.record_lag(first, 0.08)  # four lag classes above the other's
    knowledge.record_lag(other, 0.001)
    steps = route(policy, "SELECT 1", primary=mp("0-1-5"))
    assert steps[0].action is Action.FETCH_PRIMARY_STATE  # it may have seen more than known
    assert steps[-1].target == other
    knowledge.record_lag(first, 0.007)  # one class above: not worth a move
    assert route(policy, "SELECT 1")[-1].target == other
    knowledge.record_lag(other, 0.009)
    assert route(policy, "SELECT 1")[-1].target == other


def test_an_unknown_lag_is_no_reason_to_move() -> None:
    knowledge = ReplicaKnowledge()
    policy = session(knowledge=knowledge)
    first = route(policy, "SELECT 1")[-1].target
    knowledge.record_lag(first, 0.08)  # the other's lag is unknown
    steps = route(policy, "SELECT 1")
    assert [s.action for s in steps] == [Action.EXECUTE]
    assert steps[-1].target == first


@pytest.mark.parametrize(("flavor", "state"), FLAVORS, ids=[f for f, _ in FLAVORS])
def test_a_read_that_must_move_to_another_replica_first_learns_the_primarys_state(
    flavor: FlavorName, state: Callable[[int], GtidState]
) -> None:
    """The last read may have seen a write that no session of the process had had
    acknowledged yet (its writer's OK was still on the way): only the primary's state is
    known to cover what it saw."""
    knowledge = ReplicaKnowledge()
    knowledge.record_executed(R1, state(50))
    knowledge.record_executed(R2, state(20))
    policy = session(flavor=flavor, knowledge=knowledge)
    [first] = route(policy, "SELECT 1")
    assert first.target == R1  # it may have seen up to 60: R1 has applied more than is known
    knowledge.record_failure(R1)
    steps = route(policy, "SELECT 1", primary=state(60))
    assert [s.action for s in steps] == [Action.FETCH_PRIMARY_STATE, Action.WAIT, Action.EXECUTE]
    assert steps[1].target == R2
    assert steps[1].wait_set is not None
    assert merge(state(20), steps[1].wait_set) == state(60)  # what R2 lacks of the primary's
    assert steps[-1].reason is Reason.WAITED
    assert policy.token == format_token(state(60))
    # Then it keeps to R2: no more fetches.
    knowledge.record_executed(R2, state(60))
    assert [s.action for s in route(policy, "SELECT 1")] == [Action.EXECUTE]


def test_a_read_after_one_on_the_primary_learns_the_primarys_state() -> None:
    policy = session(flavor="mariadb")
    [d] = route(policy, "/* consistent: primary */ SELECT 1")
    assert d.target == PRIMARY
    steps = route(policy, "SELECT 1", primary=mp("0-1-8"))
    assert steps[0].action is Action.FETCH_PRIMARY_STATE
    assert steps[-1].required == mp("0-1-8")


def test_a_whole_set_reported_after_the_last_read_spares_the_fetch() -> None:
    knowledge = ReplicaKnowledge()
    policy = session(flavor="mysql", knowledge=knowledge)
    [read] = route(policy, "SELECT 1")
    # MySQL ALL_GTIDS on the replica's connection, after the read: the replica's whole set.
    policy.observe_gtids(read.target, gs(f"{A}:1-30"))
    knowledge.record_failure(read.target)
    steps = route(policy, "SELECT 1")
    assert steps[0].action is Action.WAIT
    assert steps[0].wait_set == gs(f"{A}:1-30")
    # On the primary, only ALL_GTIDS is its whole set (OWN_GTID is the session's own GTIDs).
    mysql = session(flavor="mysql")
    route(mysql, "/* consistent: primary */ SELECT 1")
    mysql.observe_gtids(PRIMARY, gs(f"{A}:1-40"))  # a COMMIT's OK under ALL_GTIDS
    assert route(mysql, "SELECT 1")[0].action is Action.WAIT
    mariadb = session(flavor="mariadb")
    route(mariadb, "/* consistent: primary */ SELECT 1")
    mariadb.observe_gtids(PRIMARY, mp("0-1-40"))  # last_gtid: the session's own write only
    assert route(mariadb, "SELECT 1", primary=mp("0-1-41"))[0].action is (
        Action.FETCH_PRIMARY_STATE
    )


def test_a_replica_that_reports_its_state_is_seen_at_read_all_writes_only() -> None:
    for level, expected in (("read_all_writes", gs(f"{A}:1-30")), ("read_own_writes", None)):
        policy = session(flavor="mysql", level=level)
        [read] = route(policy, "SELECT 1")
        # MySQL ALL_GTIDS on the replica's connection: the read's OK carries its executed set.
        policy.observe_gtids(read.target, gs(f"{A}:1-30"))
        assert policy.seen == expected


def test_eventual_reads_add_nothing_to_what_is_required() -> None:
    knowledge = ReplicaKnowledge()
    knowledge.record_executed(R1, mp("0-1-50"))
    policy = session(level="eventual", knowledge=knowledge, replicas=(R1,))
    route(policy, "SELECT 1")
    assert policy.seen is None
    assert policy.token == ""


def test_the_decision_says_where_the_required_set_came_from() -> None:
    knowledge, shared = ReplicaKnowledge(), AcknowledgedWrites()
    knowledge.record_executed(R1, mp("1-1-8"))
    writer = session(level="read_own_writes", knowledge=knowledge, acknowledged=shared)
    policy = session(knowledge=knowledge, acknowledged=shared, replicas=(R1,))
    write(policy, mp("0-1-4"))
    route(policy, "SELECT 1")  # sees what R1 is known to have: 1-1-8
    write(writer, mp("0-1-6"))
    policy.require("mariadb:2-1-1")
    steps = route(policy, "SELECT 1")
    assert steps[-1].sources == RequiredSources(
        own=mp("0-1-4,2-1-1"), seen=mp("0-1-4,1-1-8"), acknowledged=mp("0-1-6")
    )
    assert steps[-1].required == mp("0-1-6,1-1-8,2-1-1")
    # Other levels and writes carry no sources.
    assert route(policy, "INSERT INTO t VALUES (2)")[-1].sources is None
    policy.level = Level.READ_OWN_WRITES
    assert route(policy, "SELECT 1")[-1].sources is None


def test_forgetting_the_required_set_forgets_what_was_seen() -> None:
    knowledge = ReplicaKnowledge()
    knowledge.record_executed(R1, mp("0-1-50"))
    policy = session(knowledge=knowledge, replicas=(R1,))
    route(policy, "SELECT 1")
    assert policy.token == "mariadb:0-1-50"
    policy.forget_required()
    assert (policy.token, policy.seen) == ("", None)
    route(policy, "SELECT 1")
    assert policy.token == "mariadb:0-1-50"  # learnt again from the next read


# --- the guarantee, against a simulated topology --------------------------------------------------

SIM_REPLICAS = (R1, R2)

sim_operations = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 2)),  # a session of the process writes
        st.tuples(st.just("external"), st.just(0)),  # another process writes
        st.tuples(st.just("read"), st.integers(0, 2)),
        st.tuples(st.just("apply"), st.sampled_from(SIM_REPLICAS)),
        st.tuples(st.just("poll"), st.sampled_from(SIM_REPLICAS)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(sim_operations, st.sampled_from(["mysql", "mariadb"]))
# A read served by the primary saw another process's write: the next may not miss it.
@example([("write", 0), ("external", 0), ("read", 0), ("apply", R2), ("read", 0)], "mysql")
# A read on one replica saw another process's write that the other replica lacks.
@example([("external", 0), ("apply", R1), ("read", 0), ("read", 0)], "mariadb")
def test_property_reads_see_what_was_acknowledged_and_never_go_backwards(
    ops: list[tuple[str, object]], flavor: FlavorName
) -> None:
    """Three sessions of one process (sharing knowledge and the acknowledged state) over a
    simulated primary, writes from another process, and two replicas that apply in order and
    answer waits truthfully.  MySQL replicas report their executed set with each read (ALL_GTIDS
    on replica connections); a monitor poll tells what a replica has.

    Every read a replica serves sees every write acknowledged before it began, and never less
    than what the session's previous read saw, on the primary or on a replica."""
    state: Callable[[int], GtidState] = (
        (lambda n: gs(f"{A}:1-{n}") if n else GtidSet())
        if flavor == "mysql"
        else (lambda n: mp(f"0-1-{n}") if n else MariaPosition())
    )
    knowledge, shared = ReplicaKnowledge(), AcknowledgedWrites()
    sessions = [
        session(flavor=flavor, knowledge=knowledge, acknowledged=shared, replicas=SIM_REPLICAS)
        for _ in range(3)
    ]
    primary = acked = 0
    applied = dict.fromkeys(SIM_REPLICAS, 0)
    floor = [0, 0, 0]  # what each session's reads are bound to see from now on

    def reached(d: Decision) -> WaitOutcome:
        assert d.wait_set is not None
        ok = covers(state(applied[d.target]), d.wait_set)
        return WaitOutcome.REACHED if ok else WaitOutcome.TIMED_OUT

    for op, arg in ops:
        if op == "write":
            primary += 1
            acked = primary
            write(sessions[int(str(arg))], state(primary))
        elif op == "external":
            primary += 1
        elif op == "apply":
            applied[str(arg)] = min(primary, applied[str(arg)] + 1)
        elif op == "poll":
            knowledge.record_executed(str(arg), state(applied[str(arg)]))
        else:
            i = int(str(arg))
            before = acked
            final = route(sessions[i], "SELECT v FROM t", reached, primary=state(primary))[-1]
            if final.target == PRIMARY:
                floor[i] = primary
                continue
            saw = applied[final.target]
            assert saw >= before, "a write acknowledged before the read is missing"
            assert saw >= floor[i], "the read went backwards"
            floor[i] = saw
            if flavor == "mysql":
                sessions[i].observe_gtids(final.target, state(saw))


def test_a_mariadb_session_tracks_its_own_gtids_at_every_level() -> None:
    # MariaDB has only last_gtid: the policy asks for it whatever the level.
    for level in Level:
        assert session(flavor="mariadb", level=level.value).tracking is Tracking.OWN
    assert PolicyConfig(level=Level.READ_ALL_WRITES).tracking_on("mariadb") is Tracking.OWN
    assert PolicyConfig(level=Level.READ_ALL_WRITES).tracking_on("mysql") is Tracking.ALL


def test_only_read_all_writes_keeps_to_a_replica() -> None:
    policy = session()
    route(policy, "SELECT 1")  # at read_all_writes: the session keeps to this replica
    policy.level = Level.READ_OWN_WRITES
    assert {route(policy, "SELECT 1")[-1].target for _ in range(4)} == {R1, R2}
