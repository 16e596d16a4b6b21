"""The compiled modules, and the refusal to import one older than its source."""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import pkgutil
import types
from pathlib import Path

import pytest

import consistent.emulator
import proxy
from consistent.native import (
    COMPILED,
    StaleNativeModule,
    compiled_files,
    is_compiled,
    require_fresh,
    source_path,
    stale_modules,
)

ROOT = Path(__file__).resolve().parents[2]
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _tree(tmp_path: Path, *, source_mtime: float, extension_mtime: float) -> Path:
    """A fake tree with proxy/relay.py and its compiled module, with the given mtimes."""
    package = tmp_path / "proxy"
    package.mkdir()
    source = package / "relay.py"
    source.write_text("x = 1\n")
    extension = package / f"relay{SUFFIX}"
    extension.write_bytes(b"\x7fELF")
    os.utime(source, (source_mtime, source_mtime))
    os.utime(extension, (extension_mtime, extension_mtime))
    (package / f"_native__mypyc{SUFFIX}").write_bytes(b"\x7fELF")
    return tmp_path


def test_every_compiled_module_has_its_source_in_the_tree() -> None:
    missing = [name for name in COMPILED if not source_path(ROOT, name).is_file()]
    assert missing == []
    assert source_path(ROOT, "proxy.relay") == ROOT / "proxy" / "relay.py"


def test_a_compiled_module_older_than_its_source_is_stale(tmp_path: Path) -> None:
    root = _tree(tmp_path, source_mtime=2_000_000, extension_mtime=1_000_000)
    assert stale_modules(root, "proxy") == ["proxy.relay"]
    assert stale_modules(root, "consistent.policy") == []
    with pytest.raises(StaleNativeModule, match=r"proxy\.relay.*make native"):
        require_fresh("proxy", root)


def test_a_compiled_module_newer_than_its_source_is_fresh(tmp_path: Path) -> None:
    root = _tree(tmp_path, source_mtime=1_000_000, extension_mtime=2_000_000)
    assert stale_modules(root, "proxy") == []
    require_fresh("proxy", root)


def test_a_compiled_module_no_longer_listed_is_stale(tmp_path: Path) -> None:
    root = _tree(tmp_path, source_mtime=1_000_000, extension_mtime=2_000_000)
    (root / "proxy" / "cli.py").write_text("x = 1\n")
    (root / "proxy" / f"cli{SUFFIX}").write_bytes(b"\x7fELF")
    (root / "proxy" / f"gone{SUFFIX}").write_bytes(b"\x7fELF")
    assert "proxy.cli" not in COMPILED
    assert stale_modules(root, "proxy") == ["proxy.cli", "proxy.gone"]


def test_a_source_without_a_compiled_module_is_never_stale(tmp_path: Path) -> None:
    root = _tree(tmp_path, source_mtime=2_000_000, extension_mtime=1_000_000)
    (root / "proxy" / f"relay{SUFFIX}").unlink()
    assert stale_modules(root, "proxy") == []


def test_compiled_files_lists_the_modules_and_the_shared_runtime(tmp_path: Path) -> None:
    root = _tree(tmp_path, source_mtime=1, extension_mtime=2)
    names = sorted(path.relative_to(root).as_posix() for path in compiled_files(root))
    assert names == sorted([f"proxy/relay{SUFFIX}", f"proxy/_native__mypyc{SUFFIX}"])


def test_is_compiled_tells_an_extension_from_a_source_module() -> None:
    fake = types.ModuleType("fake")
    fake.__file__ = f"/somewhere/relay{SUFFIX}"
    assert is_compiled(fake)
    fake.__file__ = "/somewhere/relay.py"
    assert not is_compiled(fake)
    assert not is_compiled(importlib.import_module("consistent.errors"))


def test_every_proxy_module_imports_compiled_or_not() -> None:
    """An interpreted class may not inherit from a compiled one: importing shows it."""
    names = [info.name for info in pkgutil.iter_modules(proxy.__path__, "proxy.")]
    assert {n for n in COMPILED if n.startswith("proxy.")} <= set(names)
    for name in names:
        if name != "proxy.__main__":
            importlib.import_module(name)


def test_every_emulator_module_imports_compiled_or_not() -> None:
    package = consistent.emulator
    names = [info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    assert {n for n in COMPILED if n.startswith("consistent.emulator.")} <= set(names)
    for name in names:
        importlib.import_module(name)
