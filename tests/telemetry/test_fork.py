"""A forked child (a pre-fork web server's worker) writes its own file from its own threads."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from consistent.telemetry import Telemetry, TelemetryConfig


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_its_own_trace_file(tmp_path: Path) -> None:
    telemetry = Telemetry(TelemetryConfig(traces_exporters=("file",), trace_dir=tmp_path))
    tracer = telemetry.session(system="mysql")
    with tracer.statement("SELECT 'parent'"):
        pass
    assert telemetry.flush(10)
    pid = os.fork()
    if pid == 0:  # the child: record, flush, leave without running the parent's cleanups
        code = 1
        try:
            with telemetry.session(system="mysql").statement("SELECT 'child'"):
                pass
            code = 0 if telemetry.flush(10) else 2
            telemetry.shutdown(5)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with tracer.statement("SELECT 'parent again'"):
        pass
    telemetry.shutdown(5)
    counts = {}
    for path in tmp_path.glob("consistent-*.jsonl"):
        spans = []
        for line in path.read_text().splitlines():
            (resource_spans,) = json.loads(line)["resourceSpans"]
            pids = [
                a["value"]["intValue"]
                for a in resource_spans["resource"]["attributes"]
                if a["key"] == "process.pid"
            ]
            assert path.name == f"consistent-{pids[0]}.jsonl"
            spans += resource_spans["scopeSpans"][0]["spans"]
        assert all(span["name"] == "SELECT" for span in spans), spans
        counts[path.name] = len(spans)
    assert counts == {f"consistent-{os.getpid()}.jsonl": 2, f"consistent-{pid}.jsonl": 1}
