"""``consistent emulate``: flags and TOML specs to topologies, and the running command."""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pymysql
import pytest

from consistent.emulator.cli import add_emulate_command, build_spec, configure, main, run_emulate
from consistent.emulator.config import VERSION_80, VERSION_84
from consistent.emulator.replication import (
    Exponential,
    Fixed,
    Pause,
    Stage,
    TopologyError,
    Uniform,
)
from consistent.emulator.replication.specfile import load_spec


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    add_emulate_command(sub)
    return parser.parse_args(["emulate", *argv])


def test_flags_make_a_primary_with_lagging_replicas() -> None:
    args = parse("--replicas", "2", "--lag", "20ms..800ms", "--workers", "0", "--seed", "5")
    assert args.handler is run_emulate
    spec = build_spec(args)
    assert spec.roots == ("primary",)
    assert spec.replicas == ("replica1", "replica2")
    assert {c.lag.network for c in spec.channels} == {Uniform(0.02, 0.8)}
    assert {c.lag.workers for c in spec.channels} == {0}
    assert {c.lag.seed for c in spec.channels} == {5}


def test_flags_for_a_chain_and_a_delayed_replica() -> None:
    chain = build_spec(parse("--chain", "3", "--lag", "50ms"))
    assert [(c.source, c.replica) for c in chain.channels] == [("a", "b"), ("b", "c")]
    delayed = build_spec(parse("--replicas", "1", "--delayed-replica", "30"))
    assert delayed.replicas == ("replica1", "delayed")
    assert [c.delay for c in delayed.channels] == [0, 30]
    multi = build_spec(parse("--multi-source", "2"))
    assert multi.replicas == ("replica",)
    versioned = build_spec(parse("--replicas", "1", "--mysql-version", "8.4"))
    assert {s.version for s in versioned.servers} == {VERSION_84}
    assert {s.version for s in build_spec(parse("--mysql-version", "8.0.16")).servers} == {
        "8.0.16-consistent-emulator"
    }


def test_bad_flags_are_usage_errors() -> None:
    with pytest.raises(SystemExit):
        parse("--lag", "soon")
    with pytest.raises(SystemExit):
        parse("--chain", "3", "--replicas", "2")


def test_toml_spec(tmp_path: Path) -> None:
    path = tmp_path / "topology.toml"
    path.write_text(
        textwrap.dedent(
            """
            [[server]]
            name = "primary"

            [[server]]
            name = "passive"
            log_bin = false
            compression_period = 10
            clock_skew = "-1.5s"
            version = "8.4"

            [[channel]]
            source = "primary"
            replica = "passive"
            network = "exp(50ms)"
            apply = "5ms"
            workers = 2
            delay = 3
            pauses = [{ stage = "applier", start = "10s", duration = "5s", every = "60s" }]
            """
        )
    )
    spec = load_spec(path)
    passive = spec.server("passive")
    assert (passive.log_bin, passive.gtid_executed_compression_period) == (False, 10)
    assert passive.clock_skew == -1.5
    assert (passive.version, spec.server("primary").version) == (VERSION_84, VERSION_80)
    (channel,) = spec.channels
    assert (channel.source, channel.replica, channel.delay) == ("primary", "passive", 3)
    assert channel.lag.network == Exponential(0.05)
    assert channel.lag.apply == Fixed(0.005)
    assert channel.lag.workers == 2
    assert channel.lag.pauses == (Pause(start=10.0, duration=5.0, every=60.0, stage=Stage.APPLIER),)


def test_toml_shorthand_and_errors(tmp_path: Path) -> None:
    short = tmp_path / "short.toml"
    short.write_text('chain = 4\nlag = "10ms..20ms"\n')
    spec = load_spec(short)
    assert len(spec.channels) == 3
    assert spec.channels[0].lag.network == Uniform(0.01, 0.02)
    bad = tmp_path / "bad.toml"
    bad.write_text("replicas = 2\nlagg = '1s'\n")
    with pytest.raises(TopologyError, match="lagg"):
        load_spec(bad)
    broken = tmp_path / "broken.toml"
    broken.write_text("[[server]\n")
    with pytest.raises(TopologyError):
        load_spec(broken)


def test_run_prints_addresses_and_serves_until_stopped() -> None:
    parser = argparse.ArgumentParser()
    configure(parser)
    args = parser.parse_args(["--replicas", "1", "--lag", "10ms", "--json"])
    out = io.StringIO()
    stop = threading.Event()
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(run_emulate(args, out=out, stop=stop)))
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not out.getvalue().endswith("\n") and time.monotonic() < deadline:
            time.sleep(0.02)
        servers = json.loads(out.getvalue())["servers"]
        assert [s["name"] for s in servers] == ["primary", "replica1"]
        assert servers[1]["sources"] == ["primary"]
        for server in servers:
            assert server["host"] == "127.0.0.1"
            conn = pymysql.connect(host=server["host"], port=server["port"], user="root")
            try:
                with conn.cursor() as cursor:
                    cursor.execute("SELECT @@hostname")
                    assert cursor.fetchone() == (server["name"],)
            finally:
                conn.close()
    finally:
        stop.set()
        thread.join(20)
    assert result == [0]


def test_spec_errors_exit_with_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.toml"
    assert main(["--spec", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"consistent emulate: error: cannot read {missing}: No such file or directory\n"
    )


def test_a_base_port_puts_the_servers_on_consecutive_ports(tmp_path: Path) -> None:
    spec = build_spec(parse("--replicas", "2", "--delayed-replica", "3", "--port", "23306"))
    assert [(s.name, s.port) for s in spec.servers] == [
        ("primary", 23306),
        ("replica1", 23307),
        ("replica2", 23308),
        ("delayed", 23309),
    ]
    assert [s.port for s in build_spec(parse("--chain", "3")).servers] == [None] * 3
    with pytest.raises(TopologyError, match="no room"):
        build_spec(parse("--replicas", "2", "--port", "65534"))


def test_the_spec_file_names_ports(tmp_path: Path) -> None:
    short = tmp_path / "short.toml"
    short.write_text("replicas = 1\nport = 13306\n")
    assert [s.port for s in load_spec(short).servers] == [13306, 13307]
    tables = tmp_path / "tables.toml"
    tables.write_text(
        'port = 4000\n[[server]]\nname = "p"\n[[server]]\nname = "r"\nport = 5000\n'
        '[[server]]\nname = "s"\n[[channel]]\nsource = "p"\nreplica = "r"\n'
    )
    assert [s.port for s in load_spec(tables).servers] == [4000, 5000, 4002]
    own = tmp_path / "own.toml"
    own.write_text('[[server]]\nname = "p"\nport = 4100\n[[server]]\nname = "r"\n')
    assert [s.port for s in load_spec(own).servers] == [4100, None]
    # --port overrides the file's ports.
    args = parse("--spec", str(tables), "--port", "6000")
    assert [s.port for s in build_spec(args).servers] == [6000, 6001, 6002]
    clash = tmp_path / "clash.toml"
    clash.write_text('[[server]]\nname = "p"\nport = 4100\n[[server]]\nname = "r"\nport = 4100\n')
    with pytest.raises(TopologyError, match="same port"):
        load_spec(clash)


def _free_run(length: int) -> int:
    """A base port with ``length`` free ports from it (checked by binding them)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if base + length > 65535:
            continue
        held: list[socket.socket] = []
        try:
            for port in range(base, base + length):
                held.append(socket.socket())
                held[-1].bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise AssertionError("no run of free ports found")


def test_the_servers_listen_on_the_ports_asked() -> None:
    base = _free_run(2)
    parser = argparse.ArgumentParser()
    configure(parser)
    args = parser.parse_args(["--replicas", "1", "--port", str(base), "--json"])
    out = io.StringIO()
    stop = threading.Event()
    thread = threading.Thread(target=lambda: run_emulate(args, out=out, stop=stop))
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not out.getvalue().endswith("\n") and time.monotonic() < deadline:
            time.sleep(0.02)
        servers = json.loads(out.getvalue())["servers"]
        assert [(s["name"], s["port"]) for s in servers] == [
            ("primary", base),
            ("replica1", base + 1),
        ]
        conn = pymysql.connect(host="127.0.0.1", port=base + 1, user="root")
        try:
            with conn.cursor() as cursor:
                cursor.execute("SELECT @@hostname, @@port")
                assert cursor.fetchone() == ("replica1", base + 1)
        finally:
            conn.close()
    finally:
        stop.set()
        thread.join(30)


def test_the_command_runs_until_interrupted() -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    process = subprocess.Popen(
        [sys.executable, "-m", "consistent.emulator.cli", "--chain", "3", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        servers = json.loads(line)["servers"]
        assert [s["name"] for s in servers] == ["a", "b", "c"]
        assert process.poll() is None
        process.send_signal(signal.SIGINT)
        assert process.wait(20) == 130  # stopped by Ctrl-C, as shells count it
        assert process.stderr is not None
        assert process.stderr.read() == "consistent emulate: interrupted\n"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
