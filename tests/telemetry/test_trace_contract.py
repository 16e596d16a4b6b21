"""The contract in ``consistent.trace`` is complete, consistent and in step with the policy."""

from __future__ import annotations

from consistent import trace
from consistent.classify import StatementKind
from consistent.policy import Action, Level, Reason


def _constants() -> dict[str, str]:
    return {
        name: value
        for name, value in vars(trace).items()
        if name.isupper() and isinstance(value, str) and "." in value and " " not in value
    }


def test_every_attribute_constant_is_specified_somewhere() -> None:
    not_attributes = {
        "STATEMENT_SPAN",
        "LAG_SAMPLE_SPAN",
        "ROLE_CHANGE_SPAN",
        "COUNT_SUFFIX",
        "DIGEST_SUFFIX",
        "HIGH_SUFFIX",
    }
    metric_names = {m.name for m in trace.METRICS}
    for name, value in _constants().items():
        if name in not_attributes or name.startswith("METRIC_") or value in metric_names:
            continue
        assert value in trace.ATTRIBUTES, name


def test_stage_attributes_are_specified() -> None:
    for stage in trace.LagStage:
        for field in trace.LagField:
            name = trace.lag_stage_attribute(stage, field)
            has_end = stage.value.startswith("last_")
            if field is trace.LagField.END_US and not has_end:
                assert name not in trace.ATTRIBUTES
            else:
                assert name in trace.ATTRIBUTES


def test_no_attribute_is_specified_twice_in_a_span() -> None:
    for span in trace.SPANS:
        names = [a.name for a in span.attributes]
        assert len(names) == len(set(names)), span.name


def test_enumerated_values_follow_the_policy_and_classifier() -> None:
    assert set(trace.ROUTE_REASONS) == {r.value for r in Reason}
    assert set(trace.LEVELS) == {level.value for level in Level}
    assert set(trace.STATEMENT_KINDS) == {k.name.lower() for k in StatementKind}
    assert set(trace.ROUTE_ACTIONS) == {a.value for a in Action}


def test_issue_7_names() -> None:
    required = {
        "db.system.name",
        "server.address",
        "server.port",
        "db.operation.name",
        "db.query.text",
        "consistent.session.id",
        "consistent.level",
        "consistent.statement.kind",
        "consistent.route.target",
        "consistent.route.role",
        "consistent.route.reason",
        "consistent.route.pinned_reason",
        "consistent.gtid.required",
        "consistent.wait.set",
        "consistent.wait.duration_ms",
        "consistent.wait.outcome",
        "consistent.gtid.produced",
        "consistent.replica.known_executed",
    }
    spec = trace.span_spec(trace.STATEMENT_SPAN)
    assert spec is not None
    assert required <= {a.name for a in spec.attributes}
    outcome = spec.attribute(trace.WAIT_OUTCOME)
    assert outcome is not None
    assert set(outcome.values) == {"none", "satisfied", "timeout", "error"}
    assert {"write", "in_transaction", "pinned", "known_covered", "waited"} <= set(
        trace.ROUTE_REASONS
    )
    assert {"timeout_fallback", "no_healthy_replica", "hint"} <= set(trace.ROUTE_REASONS)


def test_metric_attributes_are_contract_attributes() -> None:
    for metric in trace.METRICS:
        assert set(metric.attributes) <= trace.ATTRIBUTES, metric.name


def test_check_attributes_finds_each_kind_of_problem() -> None:
    ok = {
        trace.RECORD_KIND: "lag_sample",
        trace.DB_SYSTEM_NAME: "mariadb",
        trace.SERVER_ADDRESS: "h",
        trace.SERVER_PORT: 1,
        trace.LAG_REPLICA: "h:1",
        trace.LAG_REACHABLE: True,
    }
    assert trace.check_attributes(trace.LAG_SAMPLE_SPAN, ok) == ()
    problems = trace.check_attributes(
        trace.LAG_SAMPLE_SPAN,
        {
            **ok,
            trace.SERVER_PORT: "1",  # wrong type
            trace.DB_SYSTEM_NAME: "postgresql",  # not an allowed value
            trace.LAG_REACHABLE: 1,  # an int is not a bool
            "consistent.lag.made_up": 1,  # unknown
        },
    )
    assert len(problems) == 4
    missing = dict(ok)
    del missing[trace.LAG_REPLICA]
    (problem,) = trace.check_attributes(trace.LAG_SAMPLE_SPAN, missing)
    assert trace.LAG_REPLICA in problem
    assert trace.check_attributes("other", {}) == (
        "'other' has no known consistent.record.kind (None)",
    )
    # a bool is not an int, an int is a fine double
    assert trace.check_attributes(trace.LAG_SAMPLE_SPAN, {**ok, trace.SERVER_PORT: True})
    assert (
        trace.check_attributes(
            trace.STATEMENT_SPAN,
            {
                trace.RECORD_KIND: "statement",
                trace.DB_SYSTEM_NAME: "mysql",
                trace.DB_SYSTEM: "mysql",
                trace.SERVER_ADDRESS: "h",
                trace.SERVER_PORT: 1,
                trace.SESSION_ID: "s",
                trace.ROUTE_TARGET: "primary",
                trace.ROUTE_ROLE: "primary",
                trace.ROUTE_REASON: "write",
                trace.WAIT_DURATION_MS: 0,
                trace.WAIT_OUTCOME: "none",
                trace.WAIT_COUNT: 0,
            },
        )
        == ()
    )


def test_the_markdown_documents_every_attribute_and_metric() -> None:
    text = trace.schema_markdown()
    for name in trace.ATTRIBUTES:
        assert f"`{name}`" in text
    for metric in trace.METRICS:
        assert f"`{metric.name}`" in text
    assert text.count("| attribute | type |") == len(trace.SPANS)
