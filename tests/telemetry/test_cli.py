"""``consistent lag-sample``: registration, arguments, failure to connect, summary lines."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest

from consistent import trace
from consistent.cli import main
from consistent.telemetry import Endpoint, SpanRecord
from consistent.telemetry.cli import add_lag_sample_command, summary


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="consistent")
    add_lag_sample_command(root.add_subparsers(dest="command"))
    return root


def test_the_command_is_registered_with_its_options(tmp_path: Path) -> None:
    args = parser().parse_args(
        [
            "lag-sample",
            "--replica",
            "127.0.0.1:3307",
            "--replica",
            "delayed=[::1]:3308",
            "--primary",
            "127.0.0.1:3306",
            "--flavor",
            "mysql",
            "--interval-ms",
            "250",
            "--count",
            "4",
            "--trace-file",
            str(tmp_path / "t.jsonl"),
        ]
    )
    assert args.command == "lag-sample"
    assert args.replica == [Endpoint("127.0.0.1", 3307), Endpoint("::1", 3308)]
    assert [r.label for r in args.replica] == [None, "delayed"]
    assert args.primary == Endpoint("127.0.0.1", 3306)
    assert (args.flavor, args.interval_ms, args.count) == ("mysql", 250, 4)
    assert args.trace_file == tmp_path / "t.jsonl"
    assert callable(args.handler)


def test_a_replica_is_required() -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["lag-sample"])


def test_an_unreachable_replica_fails_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["lag-sample", "--replica", f"127.0.0.1:{port}", "--count", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"consistent lag-sample: error: cannot reach 127.0.0.1:{port}: ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--interval-ms", "0"], "--interval-ms"),
        (["--count", "-1"], "--count"),
    ],
)
def test_bad_numbers_are_refused(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lag-sample", "--replica", "h:1", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("consistent lag-sample: error: ")
    assert named in err


@pytest.mark.parametrize(
    "address", ["nonsense:abc", "h:0", "h:70000", ":3306", "[::1", "=h:3306", "r1=[::1"]
)
def test_bad_addresses_are_usage_errors(address: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["lag-sample", "--replica", address])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("consistent lag-sample: error: argument --replica: ")
    assert err.count("\n") == 1


def _record(attributes: dict[str, trace.AttributeValue]) -> SpanRecord:
    return SpanRecord(
        name=trace.LAG_SAMPLE_SPAN,
        kind=trace.SpanKind.INTERNAL,
        trace_id=1,
        span_id=1,
        start_ns=1_714_564_800_123_000_000,
        end_ns=1_714_564_800_124_000_000,
        attributes=attributes,
    )


def test_summary_lines() -> None:
    ok = summary(
        _record(
            {
                trace.LAG_REPLICA: "r:1",
                trace.LAG_REACHABLE: True,
                trace.LAG_APPLY_LAG_US: 2_500_000,
                trace.LAG_TRANSACTIONS_BEHIND: 3,
                trace.LAG_IO_RUNNING: True,
            }
        )
    )
    assert ok == "12:00:00.123 replica=r:1 apply_lag=2.500000s behind_trx=3 io=True"
    down = summary(
        _record(
            {
                trace.LAG_REPLICA: "r:2",
                trace.LAG_CHANNEL: "c2",
                trace.LAG_REACHABLE: False,
                trace.ERROR_TYPE: "x.Error",
            }
        )
    )
    assert down == "12:00:00.123 replica=r:2 channel=c2 unreachable (x.Error)"
