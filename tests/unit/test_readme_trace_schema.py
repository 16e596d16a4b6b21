"""The README's trace tables are the contract in consistent/trace.py, not a drifting copy."""

from __future__ import annotations

from pathlib import Path

from consistent import trace

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_shows_the_trace_contract_as_generated() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index("<!-- trace-schema:start -->\n") + len("<!-- trace-schema:start -->\n")
    end = text.index("\n<!-- trace-schema:end -->")
    assert text[start:end].strip() == trace.schema_markdown().strip()
    assert trace.STATEMENT_SPAN in text[start:end]
