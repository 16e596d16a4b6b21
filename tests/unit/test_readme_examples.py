"""The README's examples work as written: the proxy configuration loads, and the first Python
snippet (the DB-API quick start) passes ``mypy --strict`` with the project's settings, so that
``consistent.connect`` gives type checkers the real connection type."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from consistent.policy import Level, OnTimeout
from proxy.config import Address, load

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


def test_the_readme_proxy_configuration_loads(tmp_path: Path) -> None:
    (block,) = [b for b in _blocks("toml") if b.startswith("# proxy.toml\n")]
    path = tmp_path / "proxy.toml"
    path.write_text(block, encoding="utf-8")
    config = load(path)
    assert config.listen == Address("127.0.0.1", 6033)
    assert (config.level, config.on_timeout) == (Level.READ_OWN_WRITES, OnTimeout.PRIMARY)
    assert config.backends.primary == Address("127.0.0.1", 3306)
    assert [str(r) for r in config.backends.replicas] == ["127.0.0.1:3307", "127.0.0.1:3308"]
    assert list(config.users) == ["app"]
    assert config.admin is not None
    assert config.admin.listen == Address("127.0.0.1", 9033)


@pytest.mark.slow
def test_the_readme_first_python_snippet_passes_mypy(tmp_path: Path) -> None:
    snippet = _blocks("python")[0]
    assert "consistent.connect(" in snippet
    path = tmp_path / "readme_snippet.py"
    path.write_text(snippet, encoding="utf-8")
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            str(path),
        ],
        cwd=ROOT,  # `consistent` is this checkout's
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Success: no issues found in 1 source file" in checked.stdout
