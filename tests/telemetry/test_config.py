"""Configuration from ``OTEL_*`` and ``CONSISTENT_TRACE_*`` environment variables."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from consistent.errors import InterfaceError
from consistent.telemetry import Telemetry, TelemetryConfig
from consistent.telemetry.exporter import JsonLinesFileExporter, SdkSpanExporter


def test_nothing_set_means_nothing_recorded() -> None:
    config = TelemetryConfig.from_env({})
    assert config.traces_exporters == ()
    assert not config.traces_on
    assert not config.metrics_on
    assert not Telemetry(config).active


def test_a_trace_file_turns_the_file_exporter_on(tmp_path: Path) -> None:
    config = TelemetryConfig.from_env({"CONSISTENT_TRACE_FILE": str(tmp_path / "t.jsonl")})
    assert config.traces_exporters == ("file",)
    assert config.trace_path() == tmp_path / "t.jsonl"
    telemetry = Telemetry(config)
    try:
        (exporter,) = telemetry.exporters
        assert isinstance(exporter, JsonLinesFileExporter)
        assert exporter.path == tmp_path / "t.jsonl"
    finally:
        telemetry.shutdown()


def test_a_trace_dir_gives_one_file_per_process(tmp_path: Path) -> None:
    config = TelemetryConfig.from_env({"CONSISTENT_TRACE_DIR": str(tmp_path)})
    assert config.trace_path(pid=4242) == tmp_path / "consistent-4242.jsonl"


def test_sdk_disabled_wins(tmp_path: Path) -> None:
    env = {"OTEL_SDK_DISABLED": "true", "CONSISTENT_TRACE_FILE": str(tmp_path / "t.jsonl")}
    config = TelemetryConfig.from_env(env)
    assert not config.enabled
    assert not config.traces_on
    telemetry = Telemetry(config)
    assert not telemetry.active
    assert not (tmp_path / "t.jsonl").exists()


def test_standard_variables() -> None:
    config = TelemetryConfig.from_env(
        {
            "OTEL_SERVICE_NAME": "shop",
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,team=a%20b,service.name=x",
            "OTEL_TRACES_EXPORTER": "console, otlp,console",
            "OTEL_METRICS_EXPORTER": "console",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.25",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "OTEL_BSP_MAX_QUEUE_SIZE": "100",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10",
            "OTEL_BSP_EXPORT_TIMEOUT": "1500",
            "OTEL_METRIC_EXPORT_INTERVAL": "10000",
        }
    )
    assert config.service_name == "shop"
    assert config.resource_attributes == (("deployment.environment", "prod"), ("team", "a b"))
    assert config.traces_exporters == ("console", "otlp")
    assert config.metrics_exporters == ("console",)
    assert config.otlp_endpoint == "http://collector:4318/v1/traces"
    assert (config.sample_ratio, config.parent_based) == (0.25, True)
    assert (config.schedule_delay, config.export_timeout) == (0.2, 1.5)
    assert (config.max_queue_size, config.max_export_batch_size) == (100, 10)
    assert config.metric_export_interval == 10.0


def test_service_name_from_resource_attributes_and_signal_endpoint() -> None:
    config = TelemetryConfig.from_env(
        {
            "OTEL_RESOURCE_ATTRIBUTES": "service.name=billing",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/custom",
        }
    )
    assert config.service_name == "billing"
    assert config.otlp_endpoint == "http://b:4318/custom"


def test_our_variables(tmp_path: Path) -> None:
    config = TelemetryConfig.from_env(
        {
            "CONSISTENT_TRACE_FILE": str(tmp_path / "x.jsonl"),
            "CONSISTENT_TRACE_ROTATE_BYTES": "1000",
            "CONSISTENT_TRACE_KEEP": "3",
            "CONSISTENT_TRACE_QUERY_TEXT": "on",
            "CONSISTENT_TRACE_MAX_QUERY_CHARS": "99",
            "CONSISTENT_TRACE_MAX_GTID_CHARS": "77",
            "CONSISTENT_TRACE_WRITER_QUEUE": "4",
        }
    )
    assert (config.rotate_bytes, config.rotate_keep) == (1000, 3)
    assert config.capture_query_text
    assert (config.max_query_chars, config.max_gtid_chars) == (99, 77)
    assert config.writer_queue_batches == 4


def test_malformed_values_are_logged_and_ignored(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = TelemetryConfig.from_env(
            {
                "OTEL_BSP_MAX_QUEUE_SIZE": "lots",
                "CONSISTENT_TRACE_ROTATE_BYTES": "0",
                "OTEL_TRACES_SAMPLER": "sometimes",
                "OTEL_TRACES_SAMPLER_ARG": "2",
                "OTEL_SDK_DISABLED": "perhaps",
                "OTEL_TRACES_EXPORTER": "zipkin,file",
            }
        )
    defaults = TelemetryConfig()
    assert config.max_queue_size == defaults.max_queue_size
    assert config.rotate_bytes == defaults.rotate_bytes
    assert config.sampler == "always_on"
    assert config.sampler_ratio == 1.0
    assert config.enabled
    assert config.traces_exporters == ("file",)
    messages = " ".join(r.getMessage() for r in caplog.records)
    for name in ("OTEL_BSP_MAX_QUEUE_SIZE", "CONSISTENT_TRACE_ROTATE_BYTES", "zipkin"):
        assert name in messages


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rotate_bytes": 0},
        {"rotate_keep": -1},
        {"sampler": "sometimes"},
        {"sampler_ratio": 1.5},
        {"traces_exporters": ("zipkin",)},
        {"metrics_exporters": ("prometheus",)},
        {"max_gtid_chars": 0},
        {"schedule_delay": 0},
    ],
)
def test_programmatic_values_are_checked(kwargs: dict[str, object]) -> None:
    with pytest.raises(InterfaceError):
        TelemetryConfig(**kwargs)  # type: ignore[arg-type]


def test_console_and_otlp_exporters_are_sdk_exporters() -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    telemetry = Telemetry(
        TelemetryConfig(
            traces_exporters=("console", "otlp"), otlp_endpoint="http://127.0.0.1:9/v1/traces"
        )
    )
    try:
        kinds = [type(e.exporter).__name__ for e in telemetry.exporters]  # type: ignore[attr-defined]
        assert kinds == ["ConsoleSpanExporter", "OTLPSpanExporter"]
        assert all(isinstance(e, SdkSpanExporter) for e in telemetry.exporters)
    finally:
        telemetry.shutdown(1)


def test_the_process_default_is_built_once_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from consistent.telemetry import default_telemetry

    monkeypatch.setenv("CONSISTENT_TRACE_DIR", str(tmp_path))
    default_telemetry.cache_clear()
    try:
        telemetry = default_telemetry()
        assert telemetry is default_telemetry()
        assert telemetry.active
        with telemetry.session(system="mysql").statement("SELECT 1"):
            pass
        telemetry.shutdown()
        assert list(tmp_path.glob("consistent-*.jsonl"))
    finally:
        default_telemetry.cache_clear()
    monkeypatch.delenv("CONSISTENT_TRACE_DIR")
    try:
        assert not default_telemetry().active
    finally:
        default_telemetry.cache_clear()
