"""The README's table of the proxy's metrics is the one in proxy/metrics.py, not a drifting copy."""

from __future__ import annotations

from pathlib import Path

from proxy import metrics

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_lists_every_proxy_metric_as_declared() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index("<!-- proxy-metrics:start -->\n") + len("<!-- proxy-metrics:start -->\n")
    end = text.index("\n<!-- proxy-metrics:end -->")
    table = text[start:end]
    assert table.strip() == metrics.metrics_markdown().strip()
    for spec in metrics.METRICS:
        assert f"| `{spec.exposed}` | {spec.kind} |" in table
    for name in metrics.STANDARD_METRICS:
        assert f"`{name}`" in table
